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
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import breakpoints
from ..plumbing.pending import POLL_S, Pending
from ..stuck.report import interrupted_error, timeout_error
from .dropped import dropped_error

#: How often a wait reads Triton's log for a request it released without an answer.
DROPPED_CHECK_S = 0.5


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
