"""Statistics arithmetic on Triton's payloads, without a server."""

from __future__ import annotations

import pytest

from labkit.observe.stats import ModelStats, _add, metric, parse_metrics


def _payload(model: str, inference: int, execution: int, success: int, queue_ns: int, batches: dict[int, int]) -> dict:
    return {
        "model_stats": [
            {
                "name": model,
                "version": "1",
                "inference_count": inference,
                "execution_count": execution,
                "inference_stats": {
                    "success": {"count": success},
                    "fail": {"count": 0},
                    "queue": {"ns": queue_ns},
                    "compute_input": {"ns": 0},
                    "compute_infer": {"ns": 2 * queue_ns},
                    "compute_output": {"ns": 0},
                },
                "batch_stats": [{"batch_size": s, "compute_infer": {"count": n}} for s, n in batches.items()],
            },
            {"name": "other", "inference_count": 99, "execution_count": 99},
        ]
    }


def test_from_triton_reads_only_its_model():
    stats = ModelStats.from_triton("m", _payload("m", 10, 4, 10, 1000, {2: 3, 4: 1}))
    assert (stats.inference_count, stats.execution_count, stats.success_count) == (10, 4, 10)
    assert stats.batch_counts == {2: 3, 4: 1} and stats.max_batch_size_seen == 4
    assert stats.average_batch_size == 2.5
    assert stats.per_request_us()["queue"] == pytest.approx(0.1)
    assert stats.per_request_us()["compute_infer"] == pytest.approx(0.2)


def test_since_subtracts_and_drops_unchanged_batch_sizes():
    before = ModelStats.from_triton("m", _payload("m", 10, 4, 10, 1000, {2: 3, 4: 1}))
    after = ModelStats.from_triton("m", _payload("m", 18, 6, 18, 3000, {2: 3, 4: 3}))
    delta = after.since(before)
    assert (delta.inference_count, delta.execution_count, delta.success_count) == (8, 2, 8)
    assert delta.batch_counts == {4: 2} and delta.phase_ns["queue"] == 2000


def test_since_after_a_reload_counts_everything_anew():
    before = ModelStats.from_triton("m", _payload("m", 100, 50, 100, 1, {2: 50}))
    after = ModelStats.from_triton("m", _payload("m", 3, 3, 3, 1, {1: 3}))  # counters reset by a reload
    assert after.since(before) == after


def test_add_sums_every_field():
    a = ModelStats.from_triton("m", _payload("m", 2, 1, 2, 10, {2: 1}))
    b = ModelStats.from_triton("m", _payload("m", 3, 3, 3, 5, {1: 3}))
    total = _add(a, b)
    assert (total.inference_count, total.execution_count) == (5, 4)
    assert total.batch_counts == {1: 3, 2: 1} and total.phase_ns["queue"] == 15


def test_empty_stats_do_not_divide_by_zero():
    empty = ModelStats("m")
    assert empty.average_batch_size == 0.0 and empty.per_request_us()["queue"] == 0.0


METRICS = """# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="a",version="1"} 7
nv_inference_count{model="b",version="1"} 3
nv_inference_count{model="a",version="2"} 1
"""


def test_metrics_are_parsed_and_summed_by_label():
    samples = parse_metrics(METRICS)
    # prometheus_client names a counter's sample <name>_total
    assert metric(samples, "nv_inference_count_total", model="a") == 8
    assert metric(samples, "nv_inference_count_total") == 11
    assert metric(samples, "nv_inference_count_total", model="zzz") == 0
