"""A request timeline from Triton's own traces: which requests ran together, and how long each waited.

    with labkit.timeline(lab, "minimal_batching") as tl:
        labkit.run_load(lab, "minimal_batching", inputs, requests=8, concurrency=8)
    tl.plot()        # one row per model instance; each execution a box labelled with its batch size
    tl.table()       # the executions behind the picture

While the block runs, Triton traces every request of that model (``v2/models/<m>/trace/setting``,
level TIMESTAMPS) into a file in the server's trace folder; on leaving, the model's trace settings go back to the server's (tracing off), which also
makes Triton write the file out. Requests executed in one batch carry the same COMPUTE_START, which
groups them into executions. Traces do not name the instance that ran an execution: executions that
overlap in time are drawn on different rows ("instance lanes"), as many as the model has instances.
Counts are checked against Triton's statistics for the same span (``counts()`` vs ``stats``).

How many batch rows each request carried is not in a TIMESTAMPS trace. When every request of the span
carried the same number (Triton's statistics count the inferences), that number is used; the TENSORS
trace level would record each request's own shape, but Triton 23.12 crashes now and then (SIGSEGV in
TRITONBACKEND_ResponseSend) with TENSORS traces under concurrent load, even for a backend written
against the bare C API, so ``rows=True`` asks for it only on request.

Tracing itself is fragile in Triton 23.12: under thousands of traced requests a second it now and then
crashes the server (SIGSEGV or a heap abort in TRITONBACKEND_ResponseSend, seen here over HTTP and
gRPC, for C++ and Python backends alike). A timeline is for seeing how a few dozen or hundred requests
were batched; measure throughput without one (labkit.perf, run_load), where tracing is off.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from ..client import sequence_ids
from ..errors import ConfigError, TraceError, WaitTimeoutError
from ..plumbing.polling import wait_until
from ..server.base import TritonServer
from .plots import Picture
from .stats import ModelStats, model_stats

_SETTINGS = ("trace_file", "trace_level", "trace_rate", "log_frequency", "trace_count")
_NEEDED = ("QUEUE_START", "COMPUTE_START", "COMPUTE_END", "REQUEST_END")
_LABELS_UP_TO = 60  # executions in view; beyond that batch labels would overlap


@dataclass(frozen=True)
class TracedRequest:
    """One request as Triton traced it; times in ns on the server's monotonic clock."""

    id: int
    rows: int  # batch rows the request carried (its first dimension when the model batches)
    queue_start: int
    compute_start: int
    compute_end: int
    request_end: int
    sequence: str = ""  # the sequence id its request id names (labkit's sequence requests), else ""

    @property
    def queue_ms(self) -> float:
        return (self.compute_start - self.queue_start) / 1e6


@dataclass(frozen=True)
class Execution:
    """One call of the backend's execute: the requests Triton batched together, on one instance lane."""

    lane: int
    start: int
    end: int
    requests: tuple[TracedRequest, ...]

    @property
    def batch(self) -> int:
        """Batch size as Triton counts it: rows, summed over the requests."""
        return sum(r.rows for r in self.requests)


def trace_records(fragments: list[dict], fields: tuple[str, ...]) -> dict[int, dict[str, Any]]:
    """Triton writes each trace as fragments sharing an id: per id, their timestamps (name -> ns) and
    the ``fields`` that some fragment carries (model_name, request_id, parent_id, ...)."""
    traces: dict[int, dict[str, Any]] = defaultdict(dict)
    for fragment in fragments:
        trace = traces[fragment["id"]]
        for stamp in fragment.get("timestamps", []):
            trace[stamp["name"]] = int(stamp["ns"])
        trace.update({key: fragment[key] for key in fields if key in fragment})
    return traces


def _traced(i: int, trace: dict[str, Any]) -> TracedRequest:
    queue_start, compute_start, compute_end, request_end = (trace[k] for k in _NEEDED)
    sequence = sequence_ids.sequence_of(str(trace.get("request_id", "")))
    return TracedRequest(i, trace.get("rows", 1), queue_start, compute_start, compute_end, request_end, sequence)


def _merge(fragments: list[dict], model: str, batching: bool) -> list[TracedRequest]:
    traces = trace_records(fragments, ("model_name", "request_id"))
    for fragment in fragments if batching else ():
        if fragment.get("activity") == "TENSOR_QUEUE_INPUT":
            traces[fragment["id"]]["rows"] = int(str(fragment["tensor"]["shape"]).split(",")[0])
    return sorted(
        (_traced(i, t) for i, t in traces.items() if t.get("model_name") == model and all(k in t for k in _NEEDED)),
        key=lambda r: r.queue_start,
    )


def _uniform_rows(requests: list[TracedRequest], inferences: int) -> list[TracedRequest]:
    """Each request's rows, when they must all have carried the same number (the statistics' inferences
    divide evenly among the traced requests); else one each, as traced."""
    if not requests or inferences % len(requests) or inferences == len(requests):
        return requests
    rows = inferences // len(requests)
    return [dataclasses.replace(r, rows=rows) for r in requests]


def _executions(requests: list[TracedRequest]) -> list[Execution]:
    """Group by COMPUTE_START; put each execution on the first lane free at its start."""
    groups: dict[int, list[TracedRequest]] = defaultdict(list)
    for request in requests:
        groups[request.compute_start].append(request)
    lanes_free_at: list[int] = []
    executions = []
    for start in sorted(groups):
        batch = groups[start]
        end = max(r.compute_end for r in batch)
        lane = next((i for i, free in enumerate(lanes_free_at) if free <= start), len(lanes_free_at))
        if lane == len(lanes_free_at):
            lanes_free_at.append(end)
        lanes_free_at[lane] = end
        executions.append(Execution(lane, start, end, tuple(sorted(batch, key=lambda r: r.queue_start))))
    return executions


class Timeline:
    """Records Triton's traces of ``model`` while its ``with`` block runs; then a picture and a table.
    ``last`` keeps only the last N requests in the picture and the table (counts cover them all)."""

    def __init__(self, server: TritonServer, model: str, *, last: int | None = None, rows: bool = False) -> None:
        self.server, self.model, self.last = server, model, last
        self._levels = ["TIMESTAMPS", "TENSORS"] if rows else ["TIMESTAMPS"]
        self.requests: list[TracedRequest] = []
        self.executions: list[Execution] = []
        self.stats = ModelStats(model)  # what Triton's statistics counted over the same span
        self.instances = 1
        self._before: ModelStats | None = None
        self._file = ""

    _ensembles = False  # an ensemble's requests execute only in its steps: labkit.ensemble_timeline draws them

    def __enter__(self) -> Timeline:
        config = self.server.model_config(self.model)
        if config.get("platform") == "ensemble" and not self._ensembles:
            raise ConfigError(
                source=f"model {self.model!r}",
                problem="an ensemble's requests run only in its steps",
                remedy=f"Use labkit.ensemble_timeline(server, {self.model!r}), which draws each request's steps",
                field="platform",
                value="ensemble",
                valid=["a model with a backend"],
            )
        self._batching = int(config.get("max_batch_size", 0)) > 0
        self.instances = sum(int(g.get("count", 1)) for g in config.get("instance_group", [])) or 1
        self._before = model_stats(self.server, self.model, settle=True)
        folder, seen_by_triton = self.server.runtime.trace_folder()
        name = f"{self.model}-{uuid.uuid4().hex[:8]}.json"
        self._path, self._file = folder / name, f"{seen_by_triton}/{name}"
        self.server.models.trace_settings(
            self.model,
            {
                "trace_file": self._file,
                "trace_level": self._levels,
                "trace_rate": "1",
                "log_frequency": "0",  # all traces in one file, written when tracing ends
                "trace_count": "-1",
            },
        )
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # Back to the server's own settings (off): Triton then closes and writes the file.
        self.server.models.trace_settings(self.model, dict.fromkeys(_SETTINGS))
        if exc_type is not None:
            return
        self.stats = self._stats_since_enter()
        fragments = self._read() if self.stats.execution_count else []
        self.requests = _merge(fragments, self.model, self._batching)
        if self._batching and "TENSORS" not in self._levels:
            self.requests = _uniform_rows(self.requests, self.stats.inference_count)
        self.executions = _executions(self.requests)
        self._path.unlink(missing_ok=True)

    def _stats_since_enter(self) -> ModelStats:
        """The model's statistics since ``__enter__`` took them."""
        if self._before is None:  # __exit__ called by hand, without __enter__
            raise TraceError(
                model=self.model,
                problem=f"{type(self).__name__} records only inside its with block",
                remedy="use it as one",
            )
        return model_stats(self.server, self.model, settle=True).since(self._before)

    def _read(self, timeout_s: float = 10.0) -> list[dict]:
        def parsed() -> list[Any] | None:  # a list: an empty trace file is an answer too
            try:
                return [json.loads(self._path.read_text())]
            except (OSError, ValueError):  # not there yet, or still being written
                return None

        try:
            return wait_until(parsed, timeout_s, f"the trace file {self._file}", interval_s=0.05)[0]
        except WaitTimeoutError:
            raise TraceError(
                model=self.model,
                problem=f"the trace file {self._file} did not appear (complete) within {timeout_s:.0f} s",
                remedy="see server.logs.tail()",
            ) from None

    # -- what it recorded ----------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Executions, requests, inferences (rows) and the largest batch, from the traces."""
        return {
            "executions": len(self.executions),
            "requests": len(self.requests),
            "inferences": sum(r.rows for r in self.requests),
            "largest_batch": max((e.batch for e in self.executions), default=0),
        }

    def agrees_with_statistics(self) -> bool:
        c = self.counts()
        return c["executions"] == self.stats.execution_count and c["inferences"] == self.stats.inference_count

    def shown(self) -> list[Execution]:
        """The executions in view: all, or those holding the last ``last`` requests."""
        if self.last is None:
            return self.executions
        keep = {r.id for r in self.requests[-self.last :]}
        return [e for e in self.executions if any(r.id in keep for r in e.requests)]

    def _origin(self) -> int:
        shown = self.shown()
        return min((r.queue_start for e in shown for r in e.requests), default=0)

    def table(self) -> list[dict[str, Any]]:
        """One row per execution in view: lane, start and length (ms since the first request queued),
        batch size, requests and their longest queue wait."""
        t0 = self._origin()
        return [
            {
                "lane": e.lane,
                "start_ms": round((e.start - t0) / 1e6, 3),
                "compute_ms": round((e.end - e.start) / 1e6, 3),
                "batch": e.batch,
                "requests": len(e.requests),
                "max_queue_ms": round(max(r.queue_ms for r in e.requests), 3),
            }
            for e in self.shown()
        ]

    def __repr__(self) -> str:
        c = self.counts()
        return (
            f"<labkit timeline of {self.model}: {c['requests']} requests in {c['executions']} executions, "
            f"largest batch {c['largest_batch']}>"
        )

    def lanes(self) -> int:
        return max([self.instances] + [e.lane + 1 for e in self.shown()])

    def draw(self, ax: Any) -> None:
        """One row per instance lane; each execution a box whose height and label are its batch size,
        each request's queue wait a line that runs into the box that served it."""
        shown, t0, lanes = self.shown(), self._origin(), self.lanes()
        top = max([e.batch for e in shown] + [1])
        ms = lambda ns: (ns - t0) / 1e6  # noqa: E731
        for e in shown:
            height = 0.8 * e.batch / top
            base = e.lane + 0.9 - height
            ax.broken_barh(
                [(ms(e.start), max(ms(e.end) - ms(e.start), 1e-3))],
                (base, height),
                facecolors="#4c72b0",
                edgecolors="#2a4d80",
            )
            for k, r in enumerate(e.requests):
                y = base + height * (k + 0.5) / len(e.requests)
                ax.plot([ms(r.queue_start), ms(e.start)], [y, y], color="#dd8452", linewidth=1, alpha=0.8)
            if len(shown) <= _LABELS_UP_TO:
                ax.annotate(
                    str(e.batch),
                    (ms(e.end), base),
                    textcoords="offset points",
                    xytext=(2, -9),
                    fontsize="small",
                    color="#2a4d80",
                )
        ax.set_ylim(lanes, 0)
        ax.set_yticks([i + 0.5 for i in range(lanes)], [f"instance {i}" for i in range(lanes)])
        ax.set_xlabel("ms since the first request was queued")
        ax.set_title(
            f"{self.model}: {len(shown)} of {len(self.executions)} executions (box height: batch size), "
            f"queue waits in orange",
            fontsize="medium",
        )

    def figure(self) -> Figure:
        height = 1.4 + 1.0 * self.lanes()
        fig = Figure(figsize=(10, height))
        fig.subplots_adjust(left=0.1, right=0.97, bottom=0.55 / height, top=1 - 0.35 / height)
        self.draw(fig.subplots())
        return fig

    def plot(self) -> Picture:
        return Picture(self.figure(), f"timeline of {self.model}")

    def summary(self) -> dict[str, Any]:
        """Counts from the traces beside Triton's statistics, for a report."""
        return {
            **self.counts(),
            "stats_executions": self.stats.execution_count,
            "stats_inferences": self.stats.inference_count,
            "agrees": self.agrees_with_statistics(),
        }


def timeline(server: TritonServer, model: str, *, last: int | None = None, rows: bool = False) -> Timeline:
    """A context manager that records ``model``'s request timeline from Triton's traces around any load.
    ``rows=True`` also traces each request's input tensors, for loads whose requests carry different
    numbers of rows; Triton 23.12 can crash with those traces under concurrent load (see the module)."""
    return Timeline(server, model, last=last, rows=rows)


def plot_timelines(timelines: list[Timeline], title: str, *, same_time_axis: bool = True) -> Picture:
    """Several timelines one above the other (e.g. 2, 4 and 8 concurrent requests), on one time axis
    unless ``same_time_axis`` is False."""
    fig = Figure(figsize=(10, 0.6 + 1.7 * len(timelines)))
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.45 / (0.6 + 1.7 * len(timelines)), top=0.95, hspace=0.9)
    axes = fig.subplots(len(timelines), 1, sharex=same_time_axis, squeeze=False)[:, 0]
    for tl, ax in zip(timelines, axes):
        tl.draw(ax)
    return Picture(fig, title)
