"""Load generation: requests from N concurrent workers, latency per request, errors counted.

``run_load`` sends a number of requests (or for a time) and returns a LoadResult; ``Load`` is the same
load running in the background, whose concurrency can change while it runs (the dashboard drives one).
The workers are coroutines on one asyncio loop in one thread, each with its own connection, so that
the client costs little CPU beside the server on a small machine (see labkit.client.transports);
``labkit bench --only perf_analyzer_ratio`` compares it with perf_analyzer on the same server.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonclient.utils import InferenceServerException

from ..client.inference import translate
from ..client.transports import CONNECTIONS, RequestExpired, build_request
from ..errors import (
    LabkitError,
    ModelNotFoundError,
    OptionError,
    RequestError,
    RequestTimeoutError,
    SequenceError,
    ServerNotRunningError,
)
from ..plumbing.transport import Transport, closing_http
from ..server.base import TritonServer

Inputs = Mapping[str, np.ndarray]
_TICK_S = 0.05  # how often time limits, a dead server and concurrency changes are looked at

# A failed request's kind, by the labkit error it became (the first class that matches):
_KINDS: tuple[tuple[type[LabkitError], str], ...] = (
    (RequestTimeoutError, "timeout"),  # no answer within timeout_s
    (ModelNotFoundError, "not_loaded"),  # the model was not loaded
    (RequestError, "refused"),  # Triton refused it: it does not fit the model's inputs
    (SequenceError, "refused"),  # or it names no sequence and the model keeps state per sequence
)


@dataclass(frozen=True)
class LoadErrorRecord:
    """One failed request of a load. ``kind`` says what went wrong, from the labkit error it became:
    "timeout" (no answer within the time limit), "refused" (Triton refused it: it does not fit the
    model's inputs, or a stateful model got no sequence id), "not_loaded" (the model was not loaded),
    "connection" (the connection broke) or "failed" (the model's backend failed it). ``message`` is the error's first line, ``at_s`` when it
    failed, in seconds since the load started (as ``LoadResult.finished_at``)."""

    kind: str
    model: str
    message: str
    at_s: float

    def __str__(self) -> str:
        return self.message


def _kind(error: LabkitError, caught: BaseException | None) -> str:
    """The kind of a failed request: from the labkit error it became, or from the error caught when it
    never reached Triton's answer (a broken connection)."""
    for cls, kind in _KINDS:
        if isinstance(error, cls):
            return kind
    return "connection" if isinstance(caught, OSError) else "failed"


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
    errors: list[LoadErrorRecord] = field(default_factory=list)  # one per failed request, in order
    stuck: bool = False  # it stopped early because every worker waited past its time limit

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
            + (" (stopped: every worker was stuck)" if self.stuck else "")
        )


class Load:
    """A load running in a background thread until its requests are sent, its duration is over,
    every worker is stuck, or ``stop()``. ``concurrency`` may be changed while it runs.

        load = Load(lab, "add_sub", inputs, concurrency=8, duration_s=10).start()
        load.concurrency = 2          # takes effect within a few tens of milliseconds
        result = load.wait()          # or load.stop()

    ``inputs`` is one request's tensors (serialized once), or a function of the request index returning
    them. Each request may take ``timeout_s`` (default: the server's ``request_timeout_s``); one that
    takes longer is counted as an error, and when every worker is waiting past it the load stops.
    Errors are counted, not raised, unless the server died (ServerNotRunningError): ``errors`` holds a
    LoadErrorRecord per failed request (its kind, the model, the message, when).
    """

    def __init__(
        self,
        server: TritonServer,
        model: str,
        inputs: Inputs | Callable[[int], Inputs],
        *,
        concurrency: int = 1,
        requests: int | None = None,
        duration_s: float | None = None,
        protocol: str = "http",
        outputs: list[str] | None = None,
        timeout_s: float | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        if (requests is not None and requests < 1) or concurrency < 1:
            raise OptionError(option="requests and concurrency", value=(requests, concurrency), valid="at least 1")
        self.transport = Transport.of(protocol)
        self.server, self.model, self.protocol = server, model, self.transport.value
        self._inputs, self._outputs = inputs, outputs
        self._requests = requests if requests is not None else float("inf")
        self._duration_s = duration_s
        self.timeout_s = server.config.request_timeout_s if timeout_s is None else timeout_s
        self._on_progress = on_progress
        self._first_concurrency = self.concurrency = concurrency
        self.started = 0.0
        self._t0 = self._t_end = 0.0
        self._done: list[tuple[float, float]] = []  # (finished since start, latency) per success
        self.errors: list[LoadErrorRecord] = []
        self.stuck = False
        self._fatal: BaseException | None = None
        self._stopping = False
        self._exhausted = False
        self._abandon = False  # a kernel interrupt: end the requests in flight too
        self._conns: dict[int, Any] = {}  # worker slot -> its open connection
        self._retired: set[int] = set()  # worker slots that have nothing more to send
        self._thread: threading.Thread | None = None

    # -- control, from any thread -------------------------------------------------------------------------

    def start(self) -> Load:
        self.started = time.time()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=closing_http(self._run), name=f"labkit-load-{self.model}", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def elapsed_s(self) -> float:
        """Seconds since the load started (its whole duration once it has ended)."""
        if not self._t0:
            return 0.0
        return (self._t_end or time.perf_counter()) - self._t0

    def wait(self, timeout_s: float | None = None) -> LoadResult:
        """Wait until the load ends (a kernel interrupt stops it); its result. Raises
        ServerNotRunningError if the server died under it."""
        if self._thread is None:
            raise RuntimeError("this load was not started; call start() first")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while self._thread.is_alive() and (deadline is None or time.monotonic() < deadline):
                self._thread.join(0.1)  # short joins: Ctrl-C / a kernel interrupt gets through
        except KeyboardInterrupt:
            self._abandon = True
            self.stop()
            raise
        if self._fatal is not None:
            raise self._fatal
        return self.result()

    def stop(self, wait: bool = True) -> LoadResult:
        """Send no more requests; with ``wait``, let those in flight finish. Its result so far."""
        self._stopping = True
        if not wait:
            return self.result()
        if self._thread is not None:
            self._thread.join()
        if self._fatal is not None:
            raise self._fatal
        return self.result()

    @property
    def workers(self) -> int:
        """Workers with an open connection now (follows ``concurrency`` within a tick or a request)."""
        return len(self._conns)

    @property
    def completions(self) -> list[tuple[float, float]]:
        """(finished since start, latency) per successful request, in completion order; it grows
        while the load runs (read a slice of it; never change it)."""
        return self._done

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """(finished_at, latencies_s) of the requests that succeeded so far; safe while it runs."""
        done = np.array(self._done[: len(self._done)], dtype=float).reshape(-1, 2)
        return done[:, 0], done[:, 1]

    def result(self) -> LoadResult:
        finished, latencies = self.snapshot()
        return LoadResult(
            self.model,
            self.protocol,
            self._first_concurrency,
            self.started,
            self.elapsed_s,
            latencies,
            finished,
            list(self.errors),
            self.stuck,
        )

    # -- the loop's own thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - handed to wait(); a thread must not print
            self._fatal = self._fatal or exc
        finally:
            self._t_end = time.perf_counter()

    async def _main(self) -> None:
        fixed = (
            None
            if callable(self._inputs)
            else build_request(self.transport, self.server.endpoints.http_url, self.model, self._inputs, self._outputs)
        )
        self._indices = itertools.count()
        self._count = itertools.count(1)
        self._deadline = float("inf") if self._duration_s is None else self._t0 + self._duration_s
        self._stuck_slots: set[int] = set()
        workers: dict[int, asyncio.Task] = {}
        tracked = 0
        try:
            while True:
                target = 0 if self._no_more() else self.concurrency
                for slot in range(target):
                    if slot not in workers and slot not in self._retired:
                        workers[slot] = asyncio.create_task(self._worker(slot, fixed))
                if target != tracked:  # so that a crash report can name what was in flight
                    self.server.health.track_request(self.model, target - tracked)
                    tracked = target
                workers = {s: t for s, t in workers.items() if not t.done()}
                if not workers and self._no_more():
                    return
                await asyncio.sleep(_TICK_S)
                self._watch()
        finally:
            self._stopping = True
            if workers:
                await asyncio.gather(*workers.values(), return_exceptions=True)
            self.server.health.track_request(self.model, -tracked)

    def _no_more(self) -> bool:
        """Whether no further request is to be sent."""
        return (
            self._stopping
            or self._exhausted
            or self._fatal is not None
            or self.stuck
            or time.perf_counter() > self._deadline
            or len(self._retired) >= self.concurrency
        )

    def _watch(self) -> None:
        """Each tick: end requests past their time limit, notice a dead server, and stop when stuck."""
        now = asyncio.get_running_loop().time()
        for conn in list(self._conns.values()):
            if conn.busy and (self._abandon or now - conn.started > self.timeout_s):
                conn.expire()
        if self.server.health.died is not None and self._fatal is None:
            self._fatal = self.server.health.died
        active = set(self._conns)
        if active and active <= self._stuck_slots:
            self.stuck = True

    async def _worker(self, slot: int, fixed: Any) -> None:
        clock, t0, host = time.perf_counter, self._t0, self.server.endpoints.host
        port = self.transport.port(self.server.endpoints)
        opener = CONNECTIONS[self.transport].open
        conn = None
        try:
            while slot < self.concurrency and not self._no_more():
                request = self._next_request(slot, fixed)
                if request is None:
                    return
                start = clock()
                try:
                    if conn is None:
                        conn = self._conns[slot] = await opener(host, port)
                    await conn.send(request)
                except RequestExpired:
                    self._stuck_slots.add(slot)
                    if conn is not None:  # always open here: only send() raises RequestExpired
                        await conn.aclose()
                    conn = None
                    error = RequestTimeoutError(
                        model=self.model,
                        limit_s=self.timeout_s,
                        remedy="raise timeout_s, or look at where the model is (lab.unstick shows it)",
                    )
                    self._record(error)
                    continue
                except (InferenceServerException, OSError) as exc:
                    if isinstance(exc, OSError) and conn is not None:
                        await conn.aclose()
                        conn = None
                    if self._count_error(exc, request) and isinstance(exc, OSError):
                        await asyncio.sleep(0.01)  # a refused connection: do not spin
                    continue
                end = clock()
                self._stuck_slots.discard(slot)
                self._done.append((end - t0, end - start))
                if self._on_progress is not None:
                    self._on_progress(next(self._count))
        except Exception as exc:  # noqa: BLE001 - e.g. the inputs function or on_progress failed
            self._fatal = self._fatal or exc
        finally:
            self._conns.pop(slot, None)
            if conn is not None:
                await conn.aclose()

    def _next_request(self, slot: int, fixed: Any) -> Any:
        """The next request worker ``slot`` sends, or None when the load has no more (the worker ends)."""
        index = next(self._indices)
        if index >= self._requests:
            self._exhausted = True
            return None
        inputs = self._inputs
        if fixed or not callable(inputs):  # fixed is the request built once from inputs that are no function
            return fixed
        return build_request(self.transport, self.server.endpoints.http_url, self.model, inputs(index), self._outputs)

    def _count_error(self, exc: BaseException, request: Any) -> bool:
        """Count a failed request; a dead server ends the load instead. True if it was counted."""
        error = translate(exc, self.server, self.model, request.tensors, sequence_id=request.sequence_id)
        if isinstance(error, ServerNotRunningError):
            self._fatal = self._fatal or error
            return False
        self._record(error, exc)
        return True

    def _record(self, error: LabkitError, caught: BaseException | None = None) -> None:
        at_s = time.perf_counter() - self._t0
        self.errors.append(LoadErrorRecord(_kind(error, caught), self.model, str(error).splitlines()[0], at_s))


def run_load(
    server: TritonServer,
    model: str,
    inputs: Inputs | Callable[[int], Inputs],
    *,
    requests: int = 200,
    concurrency: int = 1,
    protocol: str = "http",
    outputs: list[str] | None = None,
    duration_s: float | None = None,
    timeout_s: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> LoadResult:
    """Send ``requests`` requests from ``concurrency`` workers (each with its own connection).

    ``inputs`` is one request's tensors, or a function of the request index returning them.
    Stops early once ``duration_s`` has passed (as ``Load`` does). Each request may take ``timeout_s``
    (default: the server's ``request_timeout_s``); later ones count as errors, and when every worker is
    stuck the run stops (``result.stuck``). Errors are counted, not raised, unless the server died.
    """
    load = Load(
        server,
        model,
        inputs,
        concurrency=concurrency,
        requests=requests,
        duration_s=duration_s,
        protocol=protocol,
        outputs=outputs,
        timeout_s=timeout_s,
        on_progress=on_progress,
    )
    return load.start().wait()
