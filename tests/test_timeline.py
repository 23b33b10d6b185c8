"""The request timeline from Triton's traces, against a real Triton: counts equal Triton's statistics
for a Python and a C++ backend, two concurrent requests are one execution of batch 2, and tracing is
off again afterwards."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
from labkit.course import reference

ONE_BATCHED = {"INPUT0": np.ones((1, 4), np.float32), "INPUT1": np.ones((1, 4), np.float32)}


@pytest.fixture(scope="module")
def cpp(server):
    reference.serve(server, ["minimal_batching"])
    return server


def test_two_concurrent_requests_are_one_execution_of_batch_two(cpp):
    with labkit.timeline(cpp, "minimal_batching") as tl:
        assert labkit.check_passthrough(cpp, "minimal_batching", concurrent=2).ok
    assert tl.counts() == {"executions": 1, "requests": 2, "inferences": 2, "largest_batch": 2}
    (execution,) = tl.executions
    assert execution.batch == 2 and len(execution.requests) == 2
    # the first request waited in the queue for the second (the model's delay is 50 ms)
    assert max(r.queue_ms for r in execution.requests) > 1.0
    assert tl.agrees_with_statistics() and tl.stats.execution_count == 1
    assert tl.table()[0]["batch"] == 2
    assert repr(tl) == "<labkit timeline of minimal_batching: 2 requests in 1 executions, largest batch 2>"


@pytest.mark.parametrize("model", ["add_sub_batching", "minimal_batching"])  # Python and C++ backends
def test_counts_equal_statistics_under_load(cpp, model):
    with labkit.timeline(cpp, model) as tl:
        # a few dozen traced requests: Triton 23.12's tracing can crash under thousands (see labkit.timeline)
        result = labkit.run_load(cpp, model, reference.sample_inputs(model), requests=96, concurrency=8)
    assert result.count == 96
    counts = tl.counts()
    assert counts["requests"] == counts["inferences"] == tl.stats.inference_count == 96
    assert counts["executions"] == tl.stats.execution_count < 96  # eight clients were batched
    assert counts["largest_batch"] > 1 and tl.agrees_with_statistics()
    # one instance: executions never overlap, so they all sit on one lane
    assert {e.lane for e in tl.executions} == {0}
    assert all(a.end <= b.start for a, b in zip(tl.executions, tl.executions[1:]))


def test_rows_of_a_request_count_as_inferences(server):
    two_rows = {k: np.ones((2, 4), np.float32) for k in ("INPUT0", "INPUT1")}
    with labkit.timeline(server, "add_sub_batching") as tl:
        labkit.run_load(server, "add_sub_batching", two_rows, requests=6)
    assert tl.counts()["inferences"] == tl.stats.inference_count == 12 and tl.counts()["requests"] == 6


def test_tracing_is_off_afterwards_and_last_n_and_picture(server):
    with labkit.timeline(server, "add_sub_batching", last=5) as tl:
        labkit.run_load(server, "add_sub_batching", ONE_BATCHED, requests=40, concurrency=2)
    assert server.models.trace_settings("add_sub_batching")["trace_level"] == ["OFF"]
    assert tl.counts()["requests"] == 40  # counts cover the whole recording ...
    shown = {r.id for e in tl.shown() for r in e.requests}
    assert {r.id for r in tl.requests[-5:]} <= shown and len(shown) < 40  # ... the picture the last 5
    assert len(tl.table()) == len(tl.shown())
    picture = tl.plot()
    assert picture.png.startswith(b"\x89PNG") and len(picture.png) > 5_000


def test_a_load_outside_the_block_is_not_traced(server):
    with labkit.timeline(server, "add_sub_batching") as tl:
        pass
    labkit.run_load(server, "add_sub_batching", ONE_BATCHED, requests=10)
    assert tl.counts()["requests"] == 0 and tl.executions == []
