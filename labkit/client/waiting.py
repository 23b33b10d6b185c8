"""Waiting for an answer while watching: every request labkit sends is started without blocking and
then waited for here, in short steps, so that

* past its time limit it ends with a RequestTimeoutError that shows where the model is stuck;
* a kernel interrupt ends it the same way (RequestInterruptedError), instead of leaving a hung cell;
* a breakpoint in model.py reached by this request opens its pdb session right here (the cell's
  input prompt, or the terminal), and the time limit pauses while the session lasts.

A request from the main thread carries a breakpoints.request_id(); requests from other threads
(load runs, concurrent checks) carry none, so their breakpoints are skipped by the stub at once.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import gevent

from .. import breakpoints
from ..errors import InferenceError
from ..stuck.report import interrupted_error, timeout_error
from .dropped import dropped_error

POLL_S = 0.1
#: How often a wait reads Triton's log for a request it released without an answer.
DROPPED_CHECK_S = 0.5
#: HTTP clients labkit makes for one call wait on their socket this long; the time limit decides sooner.
SOCKET_TIMEOUT_S = 7 * 24 * 3600.0


class Pending(Protocol):
    """A request under way: ``wait(seconds)`` returns whether it has an answer; ``result()`` gives
    it (or raises the request's error); ``cancel()`` stops waiting for it. Any object with these three
    methods is one (HttpPending, CallbackPending); none needs to inherit from this."""

    def wait(self, seconds: float) -> bool: ...

    def result(self) -> Any: ...

    def cancel(self) -> None: ...


class HttpPending:
    """An HTTP request in a greenlet of the calling thread (tritonclient's HTTP client runs on gevent)."""

    def __init__(self, send: Callable[[], Any]) -> None:
        hub = gevent.get_hub()
        # A kernel interrupt that lands while gevent's loop runs is passed on to us (and handled in
        # wait_for); gevent would also print it to stderr, which a notebook shows as an error.
        if not issubclass(KeyboardInterrupt, hub.NOT_ERROR):
            hub.NOT_ERROR = (*hub.NOT_ERROR, KeyboardInterrupt)
        self._greenlet = gevent.spawn(self._run, send)

    @staticmethod
    def _run(send: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        try:
            return send(), None
        except Exception as exc:  # noqa: BLE001 - handed to result(); gevent would print it too
            return None, exc

    def wait(self, seconds: float) -> bool:
        self._greenlet.join(timeout=seconds)
        return self._greenlet.ready()

    def result(self) -> Any:
        value, error = self._greenlet.get()
        if error is not None:
            raise error
        return value

    def cancel(self) -> None:
        self._greenlet.kill(block=False)


class CallbackPending:
    """A request whose answer comes to a callback on another thread (gRPC's async_infer, streams)."""

    def __init__(self) -> None:
        self._answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self._next: tuple[Any, Any] | None = None
        self.on_cancel: Callable[[], None] = lambda: None

    def callback(self, result: Any, error: Any) -> None:
        self._answers.put((result, error))

    def wait(self, seconds: float) -> bool:
        if self._next is None:
            try:
                self._next = self._answers.get(timeout=seconds)
            except queue.Empty:
                return False
        return True

    def result(self) -> Any:
        """The next answer (a stream has several); raises its error."""
        if self._next is None:
            raise InferenceError("result() before an answer arrived")
        (result, error), self._next = self._next, None
        if error is not None:
            raise error
        return result

    def cancel(self) -> None:
        self.on_cancel()


def limit_of(server: Any, timeout_s: float | None) -> float:
    """The time limit of one call: its own ``timeout_s``, else the server's ``request_timeout_s``;
    ``math.inf`` (or 0) means no limit."""
    limit = server.config.request_timeout_s if timeout_s is None else timeout_s
    return math.inf if not limit or limit <= 0 else float(limit)


def interactive() -> bool:
    """Whether a breakpoint reached by this thread's request can be shown to a person here."""
    return threading.current_thread() is threading.main_thread()


def wait_for(
    server: Any,
    model: str,
    pending: Pending,
    limit_s: float,
    request_id: str = "",
    extra: Callable[[], str] = lambda: "",
    log_mark: int | None = None,
) -> breakpoints.Session:
    """Wait until ``pending`` has an answer (then ``pending.result()`` gives it). Raises
    RequestTimeoutError past ``limit_s`` (debugger sessions not counted) and RequestInterruptedError
    on a kernel interrupt; both cancel the request. ``extra`` adds a sentence to the timeout's message.
    ``log_mark``: the server log's offset before the request was sent; then a request that Triton says
    it dropped raises RequestDroppedError (labkit.client.dropped) instead of waiting out its limit.
    Returns the last debugger session (``quit`` tells a request failed because the person quit)."""
    started = time.monotonic()
    paused = 0.0
    session = breakpoints.Session(False, 0.0)
    next_check = started + DROPPED_CHECK_S
    try:
        while not pending.wait(POLL_S):
            if request_id:
                for stop in breakpoints.stops(server, request_id):
                    session = breakpoints.attach(stop, done=lambda: pending.wait(0))
                    paused += session.seconds
            if log_mark is not None and time.monotonic() >= next_check:
                next_check = time.monotonic() + DROPPED_CHECK_S
                dropped = dropped_error(server, model, log_mark)
                if dropped is not None:
                    pending.cancel()
                    raise dropped
            if time.monotonic() - started - paused > limit_s:
                pending.cancel()
                raise timeout_error(server, model, limit_s, extra=extra())
    except KeyboardInterrupt:
        pending.cancel()
        raise interrupted_error(server, model, limit_s, time.monotonic() - started - paused) from None
    return session
