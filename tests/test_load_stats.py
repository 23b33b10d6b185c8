"""Load generation, statistics, metrics and the dashboard, against a real Triton."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
from labkit.observe.stats import (
    ModelStats,
    StatsCollector,
    metric,
    model_stats,
    parse_metrics,
)
from labkit.traffic.generator import run_load

ONE = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}
ONE_BATCHED = {k: v[None, :] for k, v in ONE.items()}


def test_load_counts_and_percentiles(server):
    result = run_load(server, "add_sub", ONE, requests=60, concurrency=4)
    assert result.count == 60 and result.errors == []
    assert result.throughput > 0
    assert result.percentile_ms(50) <= result.percentile_ms(90) <= result.percentile_ms(99)
    assert result.summary()["requests"] == 60


def test_load_errors_are_counted_not_lost(server):
    bad = {"INPUT0": np.ones(3, np.float32), "INPUT1": np.ones(4, np.float32)}
    mixed = lambda i: bad if i % 3 == 0 else ONE  # noqa: E731
    result = run_load(server, "add_sub", mixed, requests=30, concurrency=3)
    assert len(result.errors) == 10 and result.count == 20
    assert all("rejected the request" in e.message and e.kind == "refused" for e in result.errors)


def test_load_stops_after_its_duration(server):
    result = run_load(server, "add_sub", ONE, requests=10**6, concurrency=2, duration_s=0.5)
    assert 0 < result.count < 10**6 and result.duration_s < 5


def test_stats_against_raw_triton_numbers(server):
    model_stats(server, "add_sub", settle=True)
    before_raw = server.stats("add_sub")
    before = ModelStats.from_triton("add_sub", before_raw)
    for _ in range(7):
        labkit.check_add_sub(server)
    model_stats(server, "add_sub", settle=True)
    after_raw = server.stats("add_sub")
    delta = ModelStats.from_triton("add_sub", after_raw).since(before)
    assert delta.success_count == delta.inference_count == delta.execution_count == 7
    assert delta.batch_counts == {1: 7} and delta.average_batch_size == 1.0
    # per-request times computed by hand from Triton's own cumulative nanoseconds
    raw = lambda payload, phase: payload["model_stats"][0]["inference_stats"][phase]["ns"]  # noqa: E731
    for phase in ("queue", "compute_infer"):
        expected = (raw(after_raw, phase) - raw(before_raw, phase)) / 7 / 1e3
        assert delta.per_request_us()[phase] == pytest.approx(expected)


def test_average_batch_size_under_concurrency(server):
    before = model_stats(server, "add_sub_batching", settle=True)
    run_load(server, "add_sub_batching", ONE_BATCHED, requests=200, concurrency=8)
    delta = model_stats(server, "add_sub_batching", settle=True).since(before)
    assert delta.inference_count == 200
    assert sum(size * n for size, n in delta.batch_counts.items()) == 200
    assert delta.average_batch_size == pytest.approx(200 / delta.execution_count)
    assert delta.average_batch_size > 1.0  # 8 clients and a 2 ms queue delay do batch
    assert delta.max_batch_size_seen <= 8


def test_counter_reset_after_reload(fresh_server):
    for _ in range(6):
        labkit.check_add_sub(fresh_server)
    before = model_stats(fresh_server, "add_sub", settle=True)
    assert before.inference_count == 6  # the fixture loads add_sub but sends nothing
    fresh_server.python_model("add_sub", labkit.course.reference.add_sub_source())
    for _ in range(2):
        labkit.check_add_sub(fresh_server)
    after = model_stats(fresh_server, "add_sub", settle=True)
    assert after.inference_count == 2  # Triton restarted its counters
    assert after.since(before).inference_count == 2  # not a negative difference


def test_collector_totals_survive_a_reload(fresh_server):
    source = labkit.course.reference.add_sub_source()
    with StatsCollector(fresh_server, ["add_sub"], interval_s=0.05) as col:
        run_load(fresh_server, "add_sub", ONE, requests=40)
        fresh_server.python_model("add_sub", source)
        run_load(fresh_server, "add_sub", ONE, requests=30)
    assert col.error is None
    assert col.total("add_sub").inference_count == 70
    assert sum(s.inference_count for _, s in col.windows("add_sub")) == 70
    assert all(rate >= 0 for _, rate in col.throughput("add_sub"))


def test_metrics_parsed_with_prometheus_parser(server):
    labkit.check_add_sub(server)
    stats = model_stats(server, "add_sub", settle=True)
    samples = parse_metrics(server.models.metrics_text())
    assert metric(samples, "nv_inference_count_total", model="add_sub") == stats.inference_count
    assert metric(samples, "nv_inference_exec_count_total", model="add_sub") == stats.execution_count
    assert ("nv_inference_pending_request_count", (("model", "add_sub"), ("version", "1"))) in samples


def test_dashboard_updates_from_a_thread_without_printing(server, capfd):
    dash = labkit.Dashboard(server, "add_sub_batching", refresh_s=0.1, poll_s=0.05)
    assert repr(dash) == "<labkit Dashboard for add_sub_batching>"
    with dash:
        dash.result = run_load(server, "add_sub_batching", ONE_BATCHED, requests=300, concurrency=4)
    assert dash.collector.error is None
    assert bytes(dash._image.value).startswith(b"\x89PNG")
    assert "300 inferences" in dash._title.value
    assert dash.summary().startswith("add_sub_batching: 300 inferences")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_static_plots_write_png(server, tmp_path):
    with StatsCollector(server, ["add_sub_batching"], interval_s=0.05) as col:
        result = run_load(server, "add_sub_batching", ONE_BATCHED, requests=100, concurrency=4)
    data = labkit.observe.plots.DashboardData.collect(col, "add_sub_batching", result)
    assert len(data.latency.t) > 0 and data.total.inference_count == 100
    path = labkit.observe.plots.save(labkit.observe.plots.dashboard_figure(data), tmp_path / "d.png")
    assert path.read_bytes().startswith(b"\x89PNG") and path.stat().st_size > 10_000
