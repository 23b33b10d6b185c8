"""What Triton did, measured and shown: statistics, request timelines, plots, the live dashboard,
perf_analyzer's sweeps and labkit's own benchmark."""
