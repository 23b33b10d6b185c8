"""labkit.plumbing.pending.Pending is a Protocol: labkit's pendings and any object with its three methods conform
by their shape alone, and wait_for takes them."""

from __future__ import annotations

import inspect
from typing import Any, Protocol

from labkit.client.waiting import wait_for
from labkit.plumbing.pending import CallbackPending, HttpPending, Pending


class _Answered:
    """No base class: an answer is there at once."""

    def wait(self, seconds: float) -> bool:
        return True

    def result(self) -> Any:
        return 42

    def cancel(self) -> None:
        raise AssertionError("an answered request is not cancelled")


def test_pending_is_a_protocol_its_implementers_do_not_inherit():
    assert issubclass(Pending, Protocol) and getattr(Pending, "_is_protocol", False)
    members = ("wait", "result", "cancel")
    for cls in (HttpPending, CallbackPending, _Answered):
        assert Pending not in cls.__mro__
        for name in members:
            ours, theirs = inspect.signature(getattr(cls, name)), inspect.signature(getattr(Pending, name))
            assert list(ours.parameters) == list(theirs.parameters), (cls, name)


def test_wait_for_takes_any_object_of_that_shape():
    answered: Pending = _Answered()
    session = wait_for(server=None, model="m", pending=answered, limit_s=1.0)
    assert not session.quit and answered.result() == 42


def test_a_callback_pending_waits_then_gives_its_answer():
    pending = CallbackPending()
    assert pending.wait(0.01) is False
    pending.callback("answer", None)
    assert pending.wait(0.01) and pending.result() == "answer"
