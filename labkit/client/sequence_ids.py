"""Which sequence a request belongs to, written into its request id so that Triton's traces name it.

Triton's TIMESTAMPS traces carry a request's ``request_id`` but not its sequence id, so labkit's
sequence requests (``infer(..., sequence_id=...)``, ``run_sequences``) end their request id with
``seq=<id>``; ``labkit.timeline`` reads it back to show which sequence each batch slot served.
"""

from __future__ import annotations

_MARK = "seq="


def tag(request_id: str, sequence_id: int | str) -> str:
    """``request_id`` (may be empty) marked as a request of ``sequence_id``; unchanged for no sequence."""
    if sequence_id in (0, ""):
        return request_id
    return f"{request_id}|{_MARK}{sequence_id}" if request_id else f"{_MARK}{sequence_id}"


def sequence_of(request_id: str) -> str:
    """The sequence id a tagged request id names ("" if it names none)."""
    last = request_id.rsplit("|", 1)[-1]
    return last[len(_MARK) :] if last.startswith(_MARK) else ""
