"""Dashboard panels for metric families read from /metrics: a model's own (``pb_utils.MetricFamily``
in its model.py) beside Triton's. Counters are drawn as a rate per polling window, gauges as the value
polled; Triton's families are dashed and named "(Triton)"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.ticker import MaxNLocator

from .stats import Sample

#: Triton's own families shown beside a model's, each for the dashboard's model only.
TRITON_FAMILIES = ("nv_inference_request_success", "nv_inference_pending_request_count")
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


@dataclass(frozen=True)
class MetricSeries:
    """One family over time: ``kind`` "counter" (``values`` per second over each window) or "gauge"
    (the value polled at each ``t``)."""

    name: str
    kind: str
    t: tuple[float, ...]
    values: tuple[float, ...]

    @property
    def triton(self) -> bool:
        return self.name in TRITON_FAMILIES

    @property
    def label(self) -> str:
        return f"{self.name}{' (Triton)' if self.triton else ''}{' /s' if self.kind == 'counter' else ''}"

    @classmethod
    def from_samples(cls, samples: Sequence[Sample], until: float = float("inf")) -> tuple[MetricSeries, ...]:
        """A series per family the samples hold, in the order first seen; a counter that went down (its
        model reloaded) counts its new value in that window."""
        names = list(dict.fromkeys(name for s in samples for name in s.metrics))
        series = []
        for name in names:
            points = [(s.t, *s.metrics[name]) for s in samples if name in s.metrics and s.t <= until]
            kind = points[-1][1] if points else "gauge"
            if kind == "counter":
                t = tuple(b[0] for a, b in zip(points, points[1:]) if b[0] > a[0])
                v = tuple(
                    (b[2] - a[2] if b[2] >= a[2] else b[2]) / (b[0] - a[0])
                    for a, b in zip(points, points[1:])
                    if b[0] > a[0]
                )
            else:
                t, v = tuple(p[0] for p in points), tuple(p[2] for p in points)
            series.append(cls(name, kind, t, v))
        return tuple(series)


def _panel(series: Sequence[MetricSeries], kind: str, ax, title: str, ylabel: str) -> None:
    shown = [s for s in series if s.kind == kind]
    for i, s in enumerate(shown):
        if s.t:
            ax.plot(
                s.t,
                s.values,
                label=s.label,
                color=_COLORS[i % len(_COLORS)],
                linestyle="--" if s.triton else "-",
                linewidth=1.2,
            )
    if any(s.t for s in shown):
        ax.legend(fontsize="x-small", loc="upper left")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(5))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")


def counters_panel(series: Sequence[MetricSeries], ax) -> None:
    """The counters, as rates: the model's own beside Triton's request count."""
    _panel(series, "counter", ax, "counters: model.py's and Triton's", "per second")


def gauges_panel(series: Sequence[MetricSeries], ax) -> None:
    """The gauges as polled: the model's own beside Triton's pending requests."""
    _panel(series, "gauge", ax, "gauges: model.py's and Triton's", "value")
