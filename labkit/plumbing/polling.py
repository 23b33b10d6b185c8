"""One way to wait for something the server does without telling us (a state in its index, a port,
a log that stops growing): ask again in short steps until it holds or the time is up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import WaitTimeoutError

T = TypeVar("T")


def wait_until(predicate: Callable[[], T | None], timeout_s: float, what: str, *, interval_s: float = 0.02) -> T:
    """Return ``predicate()``'s first true value, asking every ``interval_s``. Past ``timeout_s`` raise
    WaitTimeoutError naming ``what`` was awaited (callers with a better error catch it). Whatever the
    predicate raises (e.g. "the process exited") ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(what=what, timeout_s=timeout_s)
        time.sleep(interval_s)
