"""labkit.client.waiting.Pending is a Protocol: labkit's pendings and any object with its three methods conform
by their shape alone, and wait_for takes them."""

from __future__ import annotations

import inspect
from typing import Any, Protocol

from labkit.client import waiting


class _Answered:
    """No base class: an answer is there at once."""

    def wait(self, seconds: float) -> bool:
        return True

    def result(self) -> Any:
        return 42

    def cancel(self) -> None:
        raise AssertionError("an answered request is not cancelled")


def test_pending_is_a_protocol_its_implementers_do_not_inherit():
    assert issubclass(waiting.Pending, Protocol) and getattr(waiting.Pending, "_is_protocol", False)
    members = ("wait", "result", "cancel")
    for cls in (waiting.HttpPending, waiting.CallbackPending, _Answered):
        assert waiting.Pending not in cls.__mro__
        for name in members:
            ours, theirs = inspect.signature(getattr(cls, name)), inspect.signature(getattr(waiting.Pending, name))
            assert list(ours.parameters) == list(theirs.parameters), (cls, name)


def test_wait_for_takes_any_object_of_that_shape():
    pending: waiting.Pending = _Answered()
    session = waiting.wait_for(server=None, model="m", pending=pending, limit_s=1.0)
    assert not session.quit and pending.result() == 42


def test_a_callback_pending_waits_then_gives_its_answer():
    pending = waiting.CallbackPending()
    assert pending.wait(0.01) is False
    pending.callback("answer", None)
    assert pending.wait(0.01) and pending.result() == "answer"
