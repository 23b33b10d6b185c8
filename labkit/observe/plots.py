"""Plots of batching and timing, drawn on matplotlib Figure objects (no pyplot: safe in threads).

The dashboard's panels are time series over windows: a window is drawn only once it is complete
(while load runs, the one still filling is left out, so that it cannot read as a drop), and rates
are divided by each window's own length.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..traffic.generator import LoadResult
from . import metric_plots
from .metric_plots import MetricSeries
from .stats import ModelStats, StatsCollector

_PHASE_LABELS = {"queue": "queue", "compute_input": "input", "compute_infer": "infer", "compute_output": "output"}
_PHASE_COLORS = {
    "queue": "#dd8452",
    "compute_input": "#8fbc8f",
    "compute_infer": "#4c72b0",
    "compute_output": "#937860",
}


def batch_histogram(stats: ModelStats, ax=None, max_batch: int | None = None):
    """Executions per batch size: how Triton actually batched the requests."""
    ax = ax or Figure(figsize=(4, 3)).subplots()
    top = max(max_batch or 0, stats.max_batch_size_seen, 1)
    sizes = np.arange(1, top + 1)
    ax.bar(sizes, [stats.batch_counts.get(int(s), 0) for s in sizes], color="#4c72b0")
    ax.set_xticks(sizes)
    ax.set_xlabel("batch size")
    ax.set_ylabel("executions")
    ax.set_title(f"{stats.model}: avg batch {stats.average_batch_size:.2f}")
    return ax


def phase_breakdown(stats_by_label: dict[str, ModelStats], ax=None):
    """Stacked bars of mean µs per request in queue / compute input / infer / output."""
    ax = ax or Figure(figsize=(4, 3)).subplots()
    labels = list(stats_by_label)
    bottom = np.zeros(len(labels))
    for phase, name in _PHASE_LABELS.items():
        values = np.array([stats_by_label[k].per_request_us()[phase] for k in labels])
        ax.bar(labels, values, bottom=bottom, label=name, color=_PHASE_COLORS[phase])
        bottom += values
    ax.set_ylabel("µs per request")
    ax.set_title("where the time went")
    ax.legend(fontsize="small")
    return ax


@dataclass(frozen=True)
class LatencyBins:
    """Client-side latency percentiles (ms) per time window: small enough to send to a renderer process."""

    t: tuple[float, ...]  # the middle of each window, seconds since the load began
    p50_ms: tuple[float, ...]
    p90_ms: tuple[float, ...]
    p99_ms: tuple[float, ...] = ()

    @classmethod
    def from_completions(
        cls, finished: np.ndarray, latencies: np.ndarray, window_s: float, until: float
    ) -> LatencyBins:
        """Windows of ``window_s`` that end by ``until``: later completions wait for their window to close."""
        count = int(until // window_s + 1e-9)
        if count < 1 or not finished.size:
            return cls((), (), ())
        which = (finished // window_s).astype(int)
        t, p50, p90, p99 = [], [], [], []
        for b in range(count):
            lat = latencies[which == b]
            if lat.size:
                t.append((b + 0.5) * window_s)
                p50.append(float(np.percentile(lat, 50) * 1e3))
                p90.append(float(np.percentile(lat, 90) * 1e3))
                p99.append(float(np.percentile(lat, 99) * 1e3))
        return cls(tuple(t), tuple(p50), tuple(p90), tuple(p99))

    @classmethod
    def from_result(cls, result: LoadResult | None, bins: int = 30) -> LatencyBins:
        """A finished load in ``bins`` windows (its last window ends with the load, so it counts whole)."""
        if result is None or not result.count:
            return cls((), (), ())
        end = max(float(result.finished_at.max()), 1e-6)
        return cls.from_completions(result.finished_at, result.latencies_s, end / bins, end * (1 + 1e-9))


@dataclass(frozen=True)
class Window:
    """What Triton's statistics say about one polling window (labkit.observe.stats.StatsCollector)."""

    t: float  # end of the window, seconds since collection began
    seconds: float
    inferences: int
    executions: int
    smallest_batch: int
    largest_batch: int
    share: tuple[float, float, float, float]  # queue, compute input, infer, output: fractions of the time

    @classmethod
    def of(cls, t: float, seconds: float, stats: ModelStats) -> Window:
        total = sum(stats.phase_ns.get(p, 0) for p in _PHASE_LABELS) or 1
        queue, compute_input, infer, output = (stats.phase_ns.get(p, 0) / total for p in _PHASE_LABELS)
        return cls(
            t,
            seconds,
            stats.inference_count,
            stats.execution_count,
            min(stats.batch_counts, default=0),
            max(stats.batch_counts, default=0),
            (queue, compute_input, infer, output),
        )

    @property
    def throughput(self) -> float:
        return self.inferences / self.seconds if self.seconds > 0 else 0.0

    @property
    def average_batch(self) -> float:
        return self.inferences / self.executions if self.executions else 0.0


@dataclass(frozen=True)
class DashboardData:
    """Everything the dashboard panels show, as plain picklable values."""

    model: str
    total: ModelStats
    throughput: tuple[tuple[float, float], ...]  # (window end, inferences/s) from the statistics
    latency: LatencyBins
    windows: tuple[Window, ...] = ()
    concurrency: tuple[tuple[float, int], ...] = ()  # (time, clients) each time it was set
    events: tuple[tuple[float, str], ...] = ()  # (time, what changed), drawn as marks on every panel
    elapsed_s: float = 0.0
    metrics: tuple[MetricSeries, ...] = ()  # families from /metrics, when the dashboard was given some
    ended: bool = False  # the load is over: this is the last frame

    @classmethod
    def collect(
        cls,
        collector: StatsCollector,
        model: str,
        result: LoadResult | None = None,
        *,
        latency: LatencyBins | None = None,
        concurrency: Sequence[tuple[float, int]] = (),
        events: Sequence[tuple[float, str]] = (),
        elapsed_s: float = 0.0,
        until: float | None = None,
    ) -> DashboardData:
        """From a collector's samples (each polling interval is a window, complete once polled) and the
        load's latencies (``latency``, or binned from a finished ``result``). ``until``: when the load
        ended (collector seconds); a window reaching past it counts only its time up to then."""
        samples = collector.snapshot()
        end = float("inf") if until is None else until
        windows = tuple(
            Window.of(min(after.t, end), min(after.t, end) - before.t, after.stats[model].since(before.stats[model]))
            for before, after in zip(samples, samples[1:])
            if min(after.t, end) > before.t
        )
        return cls(
            model,
            collector.total(model),
            tuple((w.t, w.throughput) for w in windows),
            latency if latency is not None else LatencyBins.from_result(result),
            windows,
            tuple(concurrency),
            tuple(events),
            elapsed_s or (samples[-1].t if samples else 0.0),
            MetricSeries.from_samples(samples, end),
            until is not None,
        )


def _marks(ax, data: DashboardData) -> None:
    for t, _ in data.events:
        ax.axvline(t, color="#999999", linestyle="--", linewidth=0.8)
    ax.set_xlim(0, max(data.elapsed_s, 1.0))
    ax.xaxis.set_major_locator(MaxNLocator(6, integer=True))  # few tick labels: text is most of a frame's cost
    ax.yaxis.set_major_locator(MaxNLocator(5))
    ax.set_xlabel("s since the load began")


def throughput_panel(data: DashboardData, ax) -> None:
    """Inferences per second in each window; changes of clients and config marked where they happened."""
    if data.throughput:
        times, values = zip(*data.throughput)
        ax.plot(times, values, color="#4c72b0")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("inferences / s")
    clients = f", {data.concurrency[-1][1]} clients" if data.concurrency else ""
    ax.set_title(f"{data.model}: throughput{clients}", fontsize="medium")
    marks = [(t, f"{c} clients") for t, c in data.concurrency[1:]] + list(data.events)
    for t, text in sorted(marks):
        ax.axvline(t, color="#55a868", linestyle=":", linewidth=0.8)
        ax.annotate(
            text,
            (t, 1),
            xycoords=("data", "axes fraction"),
            xytext=(2, -10),
            textcoords="offset points",
            fontsize="x-small",
            color="#666666",
        )
    _marks(ax, data)


def latency_panel(data: DashboardData, ax) -> None:
    """p50 / p90 / p99 request latency (as the client saw it) per window."""
    bins = data.latency
    for values, label, color in (
        (bins.p50_ms, "p50", "#4c72b0"),
        (bins.p90_ms, "p90", "#dd8452"),
        (bins.p99_ms, "p99", "#c44e52"),
    ):
        if values:
            ax.plot(bins.t, values, label=label, color=color)
    if bins.t:
        ax.legend(fontsize="x-small", loc="upper left")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("latency (ms)")
    ax.set_title("request latency", fontsize="medium")
    _marks(ax, data)


def _busy(data: DashboardData) -> tuple[list[Window], list[float]]:
    """The windows in which the model executed, and their middles."""
    ws = [w for w in data.windows if w.executions]
    return ws, [w.t - w.seconds / 2 for w in ws]


def batch_panel(data: DashboardData, ax) -> None:
    """Average batch size per window, with the smallest and largest batch of the window as a band."""
    ws, t = _busy(data)
    if ws:
        ax.fill_between(
            t,
            [w.smallest_batch for w in ws],
            [w.largest_batch for w in ws],
            color="#4c72b0",
            alpha=0.2,
            step="mid",
            label="smallest-largest",
        )
        ax.plot(t, [w.average_batch for w in ws], color="#4c72b0", label="average")
        ax.legend(fontsize="x-small", loc="upper left")
    ax.set_ylim(bottom=0, top=max([w.largest_batch for w in ws] + [1]) * 1.25)
    ax.set_ylabel("batch size")
    ax.set_title("how Triton batched", fontsize="medium")
    _marks(ax, data)


def share_panel(data: DashboardData, ax) -> None:
    """Each window's server time split into queue / compute input / infer / output, as shares."""
    ws, t = _busy(data)
    if ws:
        shares = np.array([w.share for w in ws]).T * 100
        ax.stackplot(t, shares, labels=list(_PHASE_LABELS.values()), colors=list(_PHASE_COLORS.values()), step="mid")
        ax.legend(fontsize="x-small", loc="lower left", ncol=4)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of server time")
    ax.set_title("queue vs compute", fontsize="medium")
    _marks(ax, data)


def _counters(data: DashboardData, ax) -> None:
    metric_plots.counters_panel(data.metrics, ax)
    _marks(ax, data)


def _gauges(data: DashboardData, ax) -> None:
    metric_plots.gauges_panel(data.metrics, ax)
    _marks(ax, data)


_PANELS = (throughput_panel, latency_panel, batch_panel, share_panel, _counters, _gauges)


def dashboard_rows(data: DashboardData) -> int:
    return 3 if data.metrics else 2  # a third row for metric families, when there are some


def dashboard_axes(rows: int = 2) -> tuple[Figure, list]:
    height = 3.25 * rows
    fig = Figure(figsize=(10, height), dpi=80)
    # fixed: constrained layout costs ~0.2 s a draw
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.52 / height, top=1 - 0.33 / height, wspace=0.22, hspace=0.4)
    return fig, list(fig.subplots(rows, 2).flat)


def draw_dashboard(data: DashboardData, axes: Sequence) -> None:
    """The panels on their axes: throughput, latency, batch sizes, queue vs compute; below them the metric
    families' counters and gauges, when the data holds some."""
    for panel, ax in zip(_PANELS, axes):
        panel(data, ax)


def dashboard_figure(data: DashboardData) -> Figure:
    """The dashboard as one figure (labkit.observe.dashboard_canvas keeps one from frame to frame)."""
    fig, axes = dashboard_axes(dashboard_rows(data))
    draw_dashboard(data, axes)
    return fig


class Picture:
    """A drawn figure that a notebook shows as an ``image/png`` output (kept in the saved notebook),
    with a fixed text form so that nbval, which compares text, sees the same on every run."""

    def __init__(self, figure: Figure, title: str, dpi: int = 80) -> None:
        self.figure = figure
        self.title = title
        self.png = png(figure, dpi)

    def _repr_png_(self) -> bytes:
        return self.png

    def __repr__(self) -> str:
        return f"<labkit picture: {self.title}>"

    def save(self, path: str | Path, dpi: int = 100) -> Path:
        return save(self.figure, path, dpi)


def png(fig: Figure, dpi: int = 80, compress_level: int = 6) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": compress_level})
    return buf.getvalue()


def save(fig: Figure, path: str | Path, dpi: int = 100) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path
