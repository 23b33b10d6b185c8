"""One way for tests to wait, built on labkit's own (``labkit.plumbing.polling.wait_until``): ``eventually``
waits for a condition and fails the test naming it; ``within`` says whether it came true in time (for a
test that asserts with a message of its own after it); ``never`` keeps watching for a window in which a
condition must not become true (a negative check: it fails as soon as it does).

Import it by name (``from waiting_support import eventually``): pytest puts tests/ on the path."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from labkit.errors import WaitTimeoutError
from labkit.plumbing.polling import wait_until

T = TypeVar("T")


def eventually(
    predicate: Callable[[], T], what: str = "the condition", timeout_s: float = 10.0, *, interval_s: float = 0.02
) -> T:
    """``predicate()``'s first true value, asked every ``interval_s``; an AssertionError naming ``what``
    if it is not true within ``timeout_s``."""
    try:
        return wait_until(predicate, timeout_s, what, interval_s=interval_s)
    except WaitTimeoutError as exc:
        raise AssertionError(str(exc)) from None


def within(
    predicate: Callable[[], object], timeout_s: float, what: str = "the condition", *, interval_s: float = 0.02
) -> bool:
    """Whether ``predicate()`` came true within ``timeout_s`` (asked every ``interval_s``)."""
    try:
        wait_until(predicate, timeout_s, what, interval_s=interval_s)
    except WaitTimeoutError:
        return False
    return True


def never(predicate: Callable[[], object], what: str, for_s: float, *, interval_s: float = 0.05) -> None:
    """Watch ``predicate`` for ``for_s`` seconds: an AssertionError naming ``what`` as soon as it is true."""
    try:
        wait_until(predicate, for_s, what, interval_s=interval_s)
    except WaitTimeoutError:
        return
    raise AssertionError(f"{what} happened within {for_s:g} s")
