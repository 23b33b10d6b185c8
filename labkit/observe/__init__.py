"""What Triton did, measured and shown: statistics, request timelines, plots, the live dashboard and
perf_analyzer's sweeps. ``__all__`` names the modules other wings use (``_render`` is the dashboard's own)."""

__all__ = [
    "dashboard",
    "dashboard_canvas",
    "ensembles",
    "metric_plots",
    "perf_analyzer",
    "perf_dist",
    "plots",
    "sequence_timeline",
    "stats",
    "timelines",
]
