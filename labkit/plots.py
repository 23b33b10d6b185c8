"""Plots of batching and timing, drawn on matplotlib Figure objects (no pyplot: safe in threads)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from .load import LoadResult
from .stats import ModelStats, StatsCollector

_PHASE_LABELS = {"queue": "queue", "compute_input": "input", "compute_infer": "infer", "compute_output": "output"}


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
        ax.bar(labels, values, bottom=bottom, label=name)
        bottom += values
    ax.set_ylabel("µs per request")
    ax.set_title("where the time went")
    ax.legend(fontsize="small")
    return ax


def throughput_over_time(points: Sequence[tuple[float, float]], model: str, ax=None):
    """(time, inferences/s) points, e.g. StatsCollector.throughput(model)."""
    ax = ax or Figure(figsize=(4, 3)).subplots()
    if points:
        t, v = zip(*points)
        ax.plot(t, v, marker=".")
    ax.set_xlabel("s")
    ax.set_ylabel("inferences / s")
    ax.set_title(f"{model}: throughput")
    return ax


@dataclass(frozen=True)
class LatencyBins:
    """p50/p90 latency (ms) per time bin: small enough to send to a renderer process."""

    t: tuple[float, ...]
    p50_ms: tuple[float, ...]
    p90_ms: tuple[float, ...]

    @classmethod
    def from_result(cls, result: LoadResult | None, bins: int = 30) -> "LatencyBins":
        if result is None or not result.count:
            return cls((), (), ())
        edges = np.linspace(0, result.finished_at.max(), bins + 1)
        which = np.clip(np.digitize(result.finished_at, edges) - 1, 0, bins - 1)
        t, p50, p90 = [], [], []
        for b in range(bins):
            lat = result.latencies_s[which == b]
            if lat.size:
                t.append(float(edges[b] + edges[b + 1]) / 2)
                p50.append(float(np.percentile(lat, 50) * 1e3))
                p90.append(float(np.percentile(lat, 90) * 1e3))
        return cls(tuple(t), tuple(p50), tuple(p90))


def latency_over_time(bins: LatencyBins, ax=None):
    """p50 and p90 latency over time (binned, so long runs stay cheap to draw)."""
    ax = ax or Figure(figsize=(4, 3)).subplots()
    if bins.t:
        ax.plot(bins.t, bins.p50_ms, marker=".", label="p50")
        ax.plot(bins.t, bins.p90_ms, marker=".", label="p90")
        ax.legend(fontsize="small")
    ax.set_xlabel("s")
    ax.set_ylabel("latency (ms)")
    ax.set_title("request latency")
    return ax


@dataclass(frozen=True)
class DashboardData:
    """Everything the four dashboard panels show, as plain picklable values."""

    model: str
    total: ModelStats
    throughput: tuple[tuple[float, float], ...]
    latency: LatencyBins

    @classmethod
    def collect(cls, collector: StatsCollector, model: str, result: LoadResult | None = None) -> "DashboardData":
        return cls(model, collector.total(model), tuple(collector.throughput(model)), LatencyBins.from_result(result))


def dashboard_figure(data: DashboardData) -> Figure:
    """The four panels together: batch sizes, time per phase, throughput, latency."""
    fig = Figure(figsize=(10, 6.5))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=0.95, wspace=0.25, hspace=0.4)  # fixed: constrained layout costs ~0.2 s a draw
    (a, b), (c, d) = fig.subplots(2, 2)
    batch_histogram(data.total, a)
    phase_breakdown({data.model: data.total}, b)
    throughput_over_time(data.throughput, data.model, c)
    latency_over_time(data.latency, d)
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


def png(fig: Figure, dpi: int = 80) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save(fig: Figure, path: str | Path, dpi: int = 100) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path
