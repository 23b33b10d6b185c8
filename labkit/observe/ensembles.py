"""Ensembles on a running server: write and load one (its steps checked first), and record a request
timeline in which each request shows every step it went through.

    cfg = labkit.ensemble_config("pipeline", [("RAW", "INT32", [4])], [("RESULT", "FP32", [4])], [
        labkit.Step("preprocess", {"RAW": "RAW"}, {"SCALED": "scaled"}),
        labkit.Step("square", {"IN0": "scaled"}, {"OUT0": "RESULT"})])
    labkit.serve_ensemble(lab, cfg)
    with labkit.ensemble_timeline(lab, "pipeline") as tl:
        labkit.run_load(lab, "pipeline", inputs, requests=8, concurrency=2)
    tl.plot()

Tracing the ensemble traces its steps too: Triton writes each step's request as a child trace
(``parent_id``: the ensemble request's trace) with the step model's queue and compute times.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from ..errors import ConfigError
from ..repository import ModelConfig
from ..repository.ensemble_config import check_steps, is_ensemble, step_models
from ..server.base import TritonServer
from .plots import Picture
from .timelines import _SETTINGS, Timeline, trace_records

_STEP_COLORS = ("#4c72b0", "#55a868", "#c44e52", "#8172b3", "#937860")


def serve_ensemble(server: TritonServer, cfg: ModelConfig) -> list[str]:
    """Check the ensemble's steps against the repository (EnsembleStepError before anything is written),
    write its config.pbtxt and load it; Triton loads the step models with it. Returns the ensemble and
    its step models, now serving. A refusal from Triton raises EnsembleStepError naming the step."""
    if not is_ensemble(cfg):
        raise _not_an_ensemble(cfg)
    check_steps(server.repository, cfg)
    server.repository.write_config(cfg)
    server.load(cfg.name)
    return [cfg.name, *step_models(cfg)]


def _not_an_ensemble(cfg: ModelConfig) -> ConfigError:
    return ConfigError(
        source=f"model {cfg.name!r}",
        problem="is not an ensemble's",
        remedy="build its config with labkit.ensemble_config()",
        field="platform",
        value=cfg.platform,
        valid=["ensemble"],
    )


@dataclass(frozen=True)
class StepSpan:
    """One step of one ensemble request, as Triton traced it (ns on the server's monotonic clock)."""

    model: str
    queue_start: int
    compute_start: int
    compute_end: int

    @property
    def queue_ms(self) -> float:
        return (self.compute_start - self.queue_start) / 1e6

    @property
    def compute_ms(self) -> float:
        return (self.compute_end - self.compute_start) / 1e6


@dataclass(frozen=True)
class EnsembleRequest:
    """One request to the ensemble: from Triton receiving it to its response, and its steps in order."""

    id: int
    start: int
    end: int
    steps: tuple[StepSpan, ...]

    @property
    def total_ms(self) -> float:
        return (self.end - self.start) / 1e6


def _requests(fragments: list[dict], ensemble: str) -> list[EnsembleRequest]:
    traces = trace_records(fragments, ("model_name", "parent_id"))
    children: dict[int, list[StepSpan]] = defaultdict(list)
    for trace in traces.values():
        if "parent_id" in trace and all(k in trace for k in ("QUEUE_START", "COMPUTE_START", "COMPUTE_END")):
            children[trace["parent_id"]].append(
                StepSpan(trace["model_name"], trace["QUEUE_START"], trace["COMPUTE_START"], trace["COMPUTE_END"])
            )
    return sorted(
        (
            EnsembleRequest(
                i, t["REQUEST_START"], t["REQUEST_END"], tuple(sorted(children[i], key=lambda s: s.queue_start))
            )
            for i, t in traces.items()
            if t.get("model_name") == ensemble and "parent_id" not in t and "REQUEST_START" in t and "REQUEST_END" in t
        ),
        key=lambda r: r.start,
    )


class EnsembleTimeline(Timeline):
    """Records Triton's traces of an ensemble and of its steps while its ``with`` block runs: one row
    per request, a box per step (its compute), a thin line for each step's queue wait. ``last`` keeps
    the last N requests in the picture and the table (counts cover them all)."""

    _ensembles = True

    def __init__(self, server: TritonServer, model: str, *, last: int | None = None) -> None:
        super().__init__(server, model, last=last)
        self.ensemble_requests: list[EnsembleRequest] = []
        self.step_models: list[str] = []

    def __enter__(self) -> EnsembleTimeline:
        cfg = self.server.repository.read_config(self.model)
        if not is_ensemble(cfg):
            raise _not_an_ensemble(cfg)
        self.step_models = step_models(cfg)
        super().__enter__()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.server.models.trace_settings(self.model, dict.fromkeys(_SETTINGS))
        if exc_type is not None:
            return
        self.stats = self._stats_since_enter()
        fragments = self._read() if self.stats.success_count or self.stats.fail_count else []
        self.ensemble_requests = _requests(fragments, self.model)
        self._path.unlink(missing_ok=True)

    def counts(self) -> dict[str, Any]:
        """Requests traced, and per step model how many step requests were traced."""
        per_step = {
            m: sum(1 for r in self.ensemble_requests for s in r.steps if s.model == m) for m in self.step_models
        }
        return {
            "requests": len(self.ensemble_requests),
            "steps": per_step,
            "every_request_ran_every_step": all(
                [s.model for s in r.steps] == self.step_models for r in self.ensemble_requests
            ),
        }

    def agrees_with_statistics(self) -> bool:
        """As many traced requests as the ensemble's statistics counted, and per step as its model's."""
        c = self.counts()
        return c["requests"] == self.stats.success_count and all(
            n == self.stats.steps.get(m, self.stats).success_count for m, n in c["steps"].items()
        )

    def shown(self) -> list[EnsembleRequest]:  # type: ignore[override]
        return self.ensemble_requests if self.last is None else self.ensemble_requests[-self.last :]

    def table(self) -> list[dict[str, Any]]:
        """One row per request in view: total ms, and each step's queue and compute ms."""
        return [
            {
                "request": i,
                "total_ms": round(r.total_ms, 3),
                **{
                    f"{s.model}_{part}_ms": round(getattr(s, f"{part}_ms"), 3)
                    for s in r.steps
                    for part in ("queue", "compute")
                },
            }
            for i, r in enumerate(self.shown())
        ]

    def __repr__(self) -> str:
        c = self.counts()
        return (
            f"<labkit ensemble timeline of {self.model}: {c['requests']} requests through "
            f"{' -> '.join(self.step_models)}>"
        )

    def draw(self, ax: Any) -> None:
        shown = self.shown()
        t0 = min((r.start for r in shown), default=0)
        ms = lambda ns: (ns - t0) / 1e6  # noqa: E731
        color = {m: _STEP_COLORS[i % len(_STEP_COLORS)] for i, m in enumerate(self.step_models)}
        for row, r in enumerate(shown):
            ax.plot([ms(r.start), ms(r.end)], [row, row], color="#999999", linewidth=0.8)
            for s in r.steps:
                c = color.get(s.model, "#333333")
                ax.plot([ms(s.queue_start), ms(s.compute_start)], [row, row], color=c, linewidth=2, alpha=0.5)
                ax.broken_barh([(ms(s.compute_start), max(s.compute_ms, 1e-3))], (row - 0.35, 0.7), facecolors=c)
        for m in self.step_models:
            ax.broken_barh([], (0, 0), facecolors=color[m], label=f"{m} (compute; queue wait: thin)")
        ax.set_ylim(len(shown) - 0.5, -0.5)
        ax.set_ylabel("request")
        ax.set_xlabel("ms since the first request arrived")
        ax.legend(fontsize="x-small", loc="upper right")  # requests run down and to the right
        ax.set_title(
            f"{self.model}: {len(shown)} requests, each through {' -> '.join(self.step_models)}", fontsize="medium"
        )

    def figure(self) -> Figure:
        height = 1.6 + 0.22 * max(len(self.shown()), 4)
        fig = Figure(figsize=(10, height))
        fig.subplots_adjust(left=0.08, right=0.97, bottom=0.6 / height, top=1 - 0.35 / height)
        self.draw(fig.subplots())
        return fig

    def plot(self) -> Picture:
        return Picture(self.figure(), f"ensemble timeline of {self.model}")

    def summary(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "stats_requests": self.stats.success_count,
            "stats_steps": {m: s.success_count for m, s in self.stats.steps.items()},
            "agrees": self.agrees_with_statistics(),
        }


def ensemble_timeline(server: TritonServer, model: str, *, last: int | None = None) -> EnsembleTimeline:
    """A context manager recording the ensemble ``model``'s requests and their steps from Triton's
    traces while its block runs (see labkit.timeline for tracing's limits in 23.12)."""
    return EnsembleTimeline(server, model, last=last)
