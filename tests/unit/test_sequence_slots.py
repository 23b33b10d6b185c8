"""How a timeline's executions become batch slots per sequence (labkit.observe.sequence_timeline), without a server:
a sequence keeps its slot until its last request, a new one takes the lowest free slot, and a request
naming no sequence gets a slot for that execution only."""

from __future__ import annotations

from labkit.observe.sequence_timeline import _slots
from labkit.observe.timelines import Execution, TracedRequest


def _execution(start: int, *sequences: str) -> Execution:
    requests = tuple(
        TracedRequest(start * 10 + k, 1, start, start, start + 1, start + 1, seq) for k, seq in enumerate(sequences)
    )
    return Execution(0, start, start + 1, requests)


def test_a_sequence_keeps_its_slot_and_a_finished_ones_slot_is_reused():
    executions = [_execution(0, "a", "b"), _execution(1, "b"), _execution(2, "c", "b"), _execution(3, "c")]
    # a's last request ran in execution 0: c, first seen in execution 2, takes slot 0 while b keeps slot 1
    assert _slots(executions) == [{0: "a", 1: "b"}, {1: "b"}, {0: "c", 1: "b"}, {0: "c"}]


def test_requests_without_a_sequence_fill_free_slots_for_one_execution():
    executions = [_execution(0, "a", ""), _execution(1, "", "a")]
    assert _slots(executions) == [{0: "a", 1: "?"}, {1: "?", 0: "a"}]
