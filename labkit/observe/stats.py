"""Triton's statistics and metrics, as snapshots, differences and time series.

/v2/models/<m>/stats gives cumulative counts and nanoseconds per model; they restart from zero when
a model is reloaded, which `ModelStats.since` detects. /metrics is Prometheus text, parsed with
prometheus_client's parser.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ..errors import WaitTimeoutError
from ..gpu.metrics import GpuUsage, usage as gpu_usage
from ..plumbing.polling import wait_until
from ..plumbing.transport import closing_http
from ..repository.ensemble_config import is_ensemble, step_models
from ..server.base import TritonServer

_PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class ModelStats:
    """Cumulative statistics of one model (all its versions summed)."""

    model: str
    inference_count: int = 0  # inferences, counting each batch element
    execution_count: int = 0  # times the backend's execute ran
    success_count: int = 0  # requests that succeeded
    fail_count: int = 0
    phase_ns: dict[str, int] = field(default_factory=dict)  # queue / compute_* total nanoseconds
    batch_counts: dict[int, int] = field(default_factory=dict)  # batch size -> executions
    steps: dict[str, ModelStats] = field(default_factory=dict)  # an ensemble's step models, in step order

    @classmethod
    def from_triton(cls, model: str, payload: dict) -> ModelStats:
        inference = execution = success = fail = 0
        phases = dict.fromkeys(_PHASES, 0)
        batches: dict[int, int] = {}
        for entry in payload.get("model_stats", []):
            if entry.get("name") != model:
                continue
            inference += int(entry.get("inference_count", 0))
            execution += int(entry.get("execution_count", 0))
            stats = entry.get("inference_stats", {})
            success += int(stats.get("success", {}).get("count", 0))
            fail += int(stats.get("fail", {}).get("count", 0))
            for phase in _PHASES:
                phases[phase] += int(stats.get(phase, {}).get("ns", 0))
            for batch in entry.get("batch_stats", []) or []:
                size = int(batch["batch_size"])
                batches[size] = batches.get(size, 0) + int(batch.get("compute_infer", {}).get("count", 0))
        return cls(model, inference, execution, success, fail, phases, batches)

    def since(self, earlier: ModelStats) -> ModelStats:
        """What happened between ``earlier`` and this snapshot; a reload in between restarts the count."""
        if self.execution_count < earlier.execution_count or self.inference_count < earlier.inference_count:
            return self  # counters were reset by a reload: everything counted now is new
        steps = {m: s.since(earlier.steps.get(m, ModelStats(m))) for m, s in self.steps.items()}
        return ModelStats(
            self.model,
            self.inference_count - earlier.inference_count,
            self.execution_count - earlier.execution_count,
            self.success_count - earlier.success_count,
            self.fail_count - earlier.fail_count,
            {p: self.phase_ns.get(p, 0) - earlier.phase_ns.get(p, 0) for p in _PHASES},
            {
                size: n - earlier.batch_counts.get(size, 0)
                for size, n in self.batch_counts.items()
                if n - earlier.batch_counts.get(size, 0) > 0
            },
            steps,
        )

    @property
    def average_batch_size(self) -> float:
        return self.inference_count / self.execution_count if self.execution_count else 0.0

    @property
    def max_batch_size_seen(self) -> int:
        return max(self.batch_counts, default=0)

    def per_request_us(self) -> dict[str, float]:
        """Mean microseconds per successful request in each phase (queue, compute_input/infer/output)."""
        n = self.success_count
        return {p: (self.phase_ns.get(p, 0) / n / 1e3 if n else 0.0) for p in _PHASES}

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "requests": self.success_count,
            "inferences": self.inference_count,
            "executions": self.execution_count,
            "average_batch_size": round(self.average_batch_size, 2),
            "batch_sizes": dict(sorted(self.batch_counts.items())),
            **{f"{p}_us": round(v, 1) for p, v in self.per_request_us().items()},
            **({"steps": {m: s.summary() for m, s in self.steps.items()}} if self.steps else {}),
        }


def model_stats(server: TritonServer, model: str, *, settle: bool = False) -> ModelStats:
    """The model's statistics now. Triton records them just after it answers, so a snapshot taken
    right after the last response can miss it: ``settle`` waits until two reads agree (at most 2 s).
    For an ensemble, ``steps`` holds the statistics of each model its steps name, read at the same time."""
    steps = _step_models(server, model)

    def read() -> ModelStats:
        if not steps:
            return ModelStats.from_triton(model, server.stats(model))
        every = server.stats()  # one read for the ensemble and its steps
        return dataclasses.replace(
            ModelStats.from_triton(model, every), steps={m: ModelStats.from_triton(m, every) for m in steps}
        )

    if not settle:
        return read()
    snap: ModelStats | None = None

    def agree() -> bool:  # the first call only reads: each later read comes a poll interval after the last
        nonlocal snap
        again = read()
        same, snap = again == snap, again
        return same

    try:
        wait_until(agree, 2.0, f"the statistics of {model} to settle")
    except WaitTimeoutError:
        pass  # still changing after 2 s: the last read is the best there is
    return snap if snap is not None else read()  # (wait_until asks at least once: snap is set)


def _step_models(server: TritonServer, model: str) -> list[str]:
    """The models an ensemble's steps name, from its config in the repository (none for other models)."""
    if not (server.repository.model_dir(model) / "config.pbtxt").is_file():
        return []
    cfg = server.repository.read_config(model)
    return step_models(cfg) if is_ensemble(cfg) else []


def parse_metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus text -> {(sample name, sorted labels): value}."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def family_totals(text: str, families: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[str, float]]:
    """Prometheus text -> {family: (its type, the sum of its samples whose labels include the given
    ones)} for the ``families`` named (a counter with or without ``_total``) that the text holds."""
    wanted = {name.removesuffix("_total"): name for name in families}
    found: dict[str, tuple[str, float]] = {}
    if not wanted:  # a dashboard polls 4 times a second: parse nothing it does not read
        return found
    for family in text_string_to_metric_families(text):
        name = wanted.get(family.name.removesuffix("_total"))
        if name is not None:
            want = set(families[name].items())
            found[name] = (family.type, sum(s.value for s in family.samples if want <= set(s.labels.items())))
    return found


def metric(samples: dict, name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= set(lab))


@dataclass
class Sample:
    """One poll: when, each model's cumulative stats, each model's pending requests (from /metrics),
    the metric families the collector was asked for ({name: (type, value)}), and ``gpus``: each GPU's
    utilization and memory (Triton's nv_gpu_* metrics; empty without a GPU)."""

    t: float  # seconds since the collector started
    stats: dict[str, ModelStats]
    pending: dict[str, float]
    metrics: dict[str, tuple[str, float]] = field(default_factory=dict)
    gpus: list[GpuUsage] = field(default_factory=list)


class StatsCollector:
    """Polls stats and metrics for some models in a background thread while load runs:

    ::

        with StatsCollector(server, ["minimal_batching"]) as col:
            run_load(...)
        col.throughput("minimal_batching")   # [(t, inferences/s), ...]
    """

    def __init__(
        self,
        server: TritonServer,
        models: Iterable[str],
        interval_s: float = 0.25,
        *,
        metrics: Mapping[str, Mapping[str, str]] | Iterable[str] = (),
    ) -> None:
        self.server = server
        self.models = list(models)
        # Families to read from /metrics each poll: name -> labels its samples must carry (summed).
        self.metrics = dict(metrics) if isinstance(metrics, Mapping) else {name: {} for name in metrics}
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._lock = threading.Lock()
        self.error: Exception | None = None

    @property
    def started_at(self) -> float:
        """time.monotonic() when collection began: sample times count from it."""
        return self._t0

    def poll(self, settle: bool = False) -> Sample:
        stats = {m: model_stats(self.server, m, settle=settle) for m in self.models}
        text = self.server.models.metrics_text()
        samples = parse_metrics(text)
        pending = {m: metric(samples, "nv_inference_pending_request_count", model=m) for m in self.models}
        sample = Sample(
            time.monotonic() - self._t0, stats, pending, family_totals(text, self.metrics), gpu_usage(samples)
        )
        with self._lock:
            self.samples.append(sample)
        return sample

    def _run(self) -> None:
        # A background thread must never print: in a notebook its traceback would land in whatever
        # cell runs next. Keep the first error for the owner to read.
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - reported through .error
                self.error = exc
                return

    def _before_load(self, model: str) -> None:
        if model in self.models and self.server.models.is_model_ready(model):
            self.poll(settle=True)  # a reload resets Triton's counters: take what they hold now

    def start(self) -> StatsCollector:
        self._t0 = time.monotonic()
        self.server.models.before_load.append(self._before_load)
        self.poll()
        self._thread = threading.Thread(target=closing_http(self._run), name="labkit-stats", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._before_load in self.server.models.before_load:
            self.server.models.before_load.remove(self._before_load)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.server.alive and self.error is None:
            self.poll(settle=True)

    def __enter__(self) -> StatsCollector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self.samples)

    def total(self, model: str) -> ModelStats:
        """Everything the model did between the first and the last sample (reloads accounted for)."""
        samples = self.snapshot()
        total: ModelStats | None = None
        for before, after in zip(samples, samples[1:]):
            step = after.stats[model].since(before.stats[model])
            total = step if total is None else _add(total, step)
        return total or ModelStats(model)

    def throughput(self, model: str) -> list[tuple[float, float]]:
        """(time, inferences per second) for each polling interval."""
        samples = self.snapshot()
        return [
            (after.t, after.stats[model].since(before.stats[model]).inference_count / (after.t - before.t))
            for before, after in zip(samples, samples[1:])
            if after.t > before.t
        ]

    def windows(self, model: str) -> list[tuple[float, ModelStats]]:
        """(time, what happened in the interval ending then) for each polling interval."""
        samples = self.snapshot()
        return [(after.t, after.stats[model].since(before.stats[model])) for before, after in zip(samples, samples[1:])]


def _add(a: ModelStats, b: ModelStats) -> ModelStats:
    return ModelStats(
        a.model,
        a.inference_count + b.inference_count,
        a.execution_count + b.execution_count,
        a.success_count + b.success_count,
        a.fail_count + b.fail_count,
        {p: a.phase_ns.get(p, 0) + b.phase_ns.get(p, 0) for p in _PHASES},
        {s: a.batch_counts.get(s, 0) + b.batch_counts.get(s, 0) for s in set(a.batch_counts) | set(b.batch_counts)},
        {m: _add(a.steps.get(m, ModelStats(m)), b.steps.get(m, ModelStats(m))) for m in {**a.steps, **b.steps}},
    )
