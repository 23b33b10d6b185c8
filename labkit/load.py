"""Load generation: N requests at a chosen concurrency, one client per worker, latency per request."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tritonclient.utils import InferenceServerException

from .errors import ServerNotRunningError
from .inference import prepare, translate
from .server.base import CONNECTION_ERRORS, TritonServer

Inputs = Mapping[str, np.ndarray]


@dataclass
class LoadResult:
    """What a load run measured. Latencies are per request, in seconds, in completion order."""

    model: str
    protocol: str
    concurrency: int
    started: float  # time.time() at the start, for lining up with statistics
    duration_s: float
    latencies_s: np.ndarray
    finished_at: np.ndarray  # seconds since start, per successful request
    errors: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return int(self.latencies_s.size)

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return self.count / self.duration_s if self.duration_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1e3) if self.count else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "protocol": self.protocol,
            "concurrency": self.concurrency,
            "requests": self.count,
            "errors": len(self.errors),
            "throughput_rps": round(self.throughput, 1),
            "p50_ms": round(self.percentile_ms(50), 3),
            "p90_ms": round(self.percentile_ms(90), 3),
            "p99_ms": round(self.percentile_ms(99), 3),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"{s['model']} c={s['concurrency']} {s['protocol']}: {s['requests']} ok, {s['errors']} errors, "
            f"{s['throughput_rps']} req/s, p50 {s['p50_ms']} ms, p90 {s['p90_ms']} ms, p99 {s['p99_ms']} ms"
        )


def run_load(
    server: TritonServer,
    model: str,
    inputs: Inputs | Callable[[int], Inputs],
    *,
    requests: int = 200,
    concurrency: int = 1,
    protocol: str = "http",
    outputs: list[str] | None = None,
    time_limit_s: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> LoadResult:
    """Send ``requests`` requests from ``concurrency`` workers (each with its own client).

    ``inputs`` is one request's tensors, or a function of the request index returning them.
    Stops early at ``time_limit_s``. Errors are counted, not raised, unless the server died.
    """
    if requests < 1 or concurrency < 1:
        raise ValueError("requests and concurrency must be at least 1")
    fixed = None if callable(inputs) else inputs
    indices = itertools.count()  # next() on a count is atomic under the GIL: no lock per request
    lock = threading.Lock()
    per_worker: list[tuple[list[float], list[float], list[str]]] = []
    fatal: list[BaseException] = []
    done = itertools.count(1)
    t0 = time.perf_counter()
    deadline = float("inf") if time_limit_s is None else t0 + time_limit_s

    def worker() -> None:
        latencies: list[float] = []
        finished: list[float] = []
        errors: list[str] = []
        with lock:
            per_worker.append((latencies, finished, errors))
        client = server.client(protocol)
        # Fixed inputs are serialized once per worker, as a hand-written tritonclient loop would.
        prepared = prepare(protocol, fixed, outputs) if fixed is not None else None
        clock = time.perf_counter
        try:
            while not fatal:
                index = next(indices)
                if index >= requests or clock() > deadline:
                    return
                tensors, wanted = prepared or prepare(protocol, inputs(index), outputs)
                start = clock()
                try:
                    client.infer(model, tensors, outputs=wanted)
                except (InferenceServerException, *CONNECTION_ERRORS) as exc:
                    error = translate(exc, server, model, tensors)
                    if isinstance(error, ServerNotRunningError):
                        fatal.append(error)
                        return
                    errors.append(str(error).splitlines()[0])
                    continue
                end = clock()
                latencies.append(end - start)
                finished.append(end - t0)
                if on_progress is not None:
                    on_progress(next(done))
        finally:
            client.close()

    started = time.time()
    server.track_request(model, concurrency)  # once per run, not per request: the hot loop stays bare
    threads = [threading.Thread(target=worker, name=f"labkit-load-{i}", daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    server.track_request(model, -concurrency)
    duration = time.perf_counter() - t0
    if fatal:
        raise fatal[0]
    latencies = np.array([x for lat, _, _ in per_worker for x in lat])
    finished = np.array([x for _, fin, _ in per_worker for x in fin])
    errors = [e for _, _, errs in per_worker for e in errs]
    return LoadResult(model, protocol, concurrency, started, duration, latencies, finished, errors)
