"""Python models' own metrics (pb_utils.MetricFamily) on a real Triton 23.12: read from /metrics with
prometheus_client's parser, drawn live on the Dashboard beside Triton's, and a family redefined with
another kind refused with its fields."""

from __future__ import annotations

import struct

import pytest
from waiting_support import eventually

import labkit
import labkit.errors
import labkit.server
from labkit.course.lessons import custom_metrics as cm
from labkit.observe.stats import family_totals
from labkit.server.refusals import metric_families


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        cm.setup(srv)
        yield srv


def _png_height(png: bytes) -> int:
    assert png.startswith(b"\x89PNG")
    return struct.unpack(">I", png[20:24])[0]


def test_model_py_counters_match_tritons_own(lab):
    before = cm.read(lab)
    cm.send(lab, requests=4, rows=3)
    # Triton counts a success when it releases the request, which may come just after the client has the
    # answer (model.py counted before it answered): wait for Triton's count, then compare them all
    done = before["nv_inference_request_success"][1] + 4
    after = eventually(
        lambda: (now := cm.read(lab))["nv_inference_request_success"][1] >= done and now, "Triton's count"
    )
    assert after["lesson_requests"][0] == "counter" and after["lesson_batch_requests"][0] == "gauge"
    assert after["lesson_requests"][1] - before["lesson_requests"][1] == 4
    assert after["nv_inference_request_success"][1] - before["nv_inference_request_success"][1] == 4
    assert after["lesson_rows"][1] - before["lesson_rows"][1] == 12
    assert after["lesson_batch_requests"] == ("gauge", 1.0)  # one request per execute when sent one by one


def test_family_totals_filters_by_labels_and_takes_counters_with_or_without_total():
    text = '# TYPE x counter\nx{model="a"} 2\nx{model="b"} 5\n# TYPE g gauge\ng 7\n'
    assert family_totals(text, {"x": {}, "g": {}}) == {"x": ("counter", 7.0), "g": ("gauge", 7.0)}
    assert family_totals(text, {"x_total": {"model": "b"}}) == {"x_total": ("counter", 5.0)}
    assert family_totals(text, {"absent": {}}) == {}


def test_the_dashboard_draws_the_families_beside_tritons_and_keeps_the_png(lab):
    dash = cm.dashboard(lab, duration_s=2.5, concurrency=3)
    result = dash.wait()
    assert result.count > 0 and dash.frames >= 1
    last = dash.collector.snapshot()[-1].metrics
    assert set(last) == {*cm.FAMILIES, "nv_inference_request_success", "nv_inference_pending_request_count"}
    assert last["lesson_requests"][0] == "counter" and last["nv_inference_pending_request_count"][0] == "gauge"
    # model.py counted every request Triton counted during the load
    first = dash.collector.snapshot()[0].metrics
    assert (
        last["lesson_requests"][1] - first["lesson_requests"][1]
        == last["nv_inference_request_success"][1] - first["nv_inference_request_success"][1]
        > 0
    )
    bundle = dash._final_bundle()
    assert bundle["text/plain"] == "<labkit Dashboard for metered>"
    plain = labkit.Dashboard(lab, cm.MODEL)  # no families: the two rows as before
    plain.start()
    plain.stop()
    assert _png_height(bytes(dash._image.value)) > _png_height(bytes(plain._image.value))
    series = {s.name: s for s in labkit.observe.plots.DashboardData.collect(dash.collector, cm.MODEL).metrics}
    assert series["lesson_requests"].label == "lesson_requests /s"
    assert series["nv_inference_request_success"].triton and max(series["lesson_requests"].values) > 0


def test_a_family_redefined_with_another_kind_by_another_model_is_refused(lab):
    error = cm.clash_error(lab)
    assert isinstance(error, labkit.ModelLoadError)
    assert (error.model, error.metric, error.kind) == (cm.CLASH_MODEL, "lesson_requests", "gauge")
    assert (error.registered_kind, error.registered_by) == ("counter", cm.MODEL)
    assert cm.CLASH_MODEL not in lab.loaded_models() and cm.MODEL in lab.loaded_models()
    cm.send(lab, requests=1)  # metered still serves
    error_again = cm.clash_error(lab)  # a second try: the same, and the server is fine
    assert error_again.registered_by == cm.MODEL and lab.alive


def test_a_model_redefining_its_own_family_with_another_kind_is_refused_and_keeps_serving(lab):
    changed = cm.SOURCE.replace(
        'name="lesson_rows", description="batch rows seen by model.py", kind=pb_utils.MetricFamily.COUNTER',
        'name="lesson_rows", description="batch rows seen by model.py", kind=pb_utils.MetricFamily.GAUGE',
    )
    assert changed != cm.SOURCE
    with pytest.raises(labkit.errors.MetricKindError) as info:
        lab.python_model(cm.MODEL, changed)
    assert (info.value.metric, info.value.kind, info.value.registered_kind) == ("lesson_rows", "gauge", "counter")
    assert info.value.registered_by == ""  # the version serving now: only /metrics knows its kind
    # the previous model.py is back on disk and serving
    assert (lab.repository.model_dir(cm.MODEL) / "1" / "model.py").read_text() == cm.SOURCE
    cm.send(lab, requests=1)


def test_one_model_py_defining_a_name_twice_with_two_kinds_is_refused(lab):
    twice = cm.CLASH_SOURCE.replace('name="lesson_requests"', 'name="twice_defined"').replace(
        "    def execute",
        '        self.other = pb_utils.MetricFamily(name="twice_defined", description="d", '
        "kind=pb_utils.MetricFamily.COUNTER)\n\n    def execute",
    )
    config = labkit.model_config("twice", "python", [("X", "FP32", [4])], [("X", "FP32", [4])])
    with pytest.raises(labkit.errors.MetricKindError) as info:
        lab.python_model("twice", twice, config)
    assert (info.value.metric, info.value.kind, info.value.registered_kind, info.value.registered_by) == (
        "twice_defined",
        "counter",
        "gauge",
        "twice",
    )


def test_metric_families_reads_names_and_kinds_from_source():
    assert metric_families(cm.SOURCE) == [
        ("lesson_requests", "counter"),
        ("lesson_rows", "counter"),
        ("lesson_batch_requests", "gauge"),
    ]
    assert metric_families("pb_utils.MetricFamily('n', 'd', pb_utils.MetricFamily.GAUGE)") == [("n", "gauge")]
    assert metric_families("name = f()\npb_utils.MetricFamily(name=name, description='d', kind=K)") == []
    assert metric_families("def broken(:") == []


def test_a_family_outlives_its_model_until_the_server_restarts(fresh_server):
    cm.setup(fresh_server)
    cm.send(fresh_server, requests=1)
    fresh_server.unload(cm.MODEL)
    # Triton 23.12 keeps the family on /metrics after its model unloaded, and would still refuse the gauge
    with pytest.raises(labkit.errors.MetricKindError) as info:
        fresh_server.python_model(cm.CLASH_MODEL, cm.CLASH_SOURCE, cm.CLASH_CONFIG)
    assert (info.value.registered_kind, info.value.registered_by) == ("counter", "")
    fresh_server.restart()  # a new Triton without metered: the name is free
    fresh_server.python_model(cm.CLASH_MODEL, cm.CLASH_SOURCE, cm.CLASH_CONFIG)
    assert cm.CLASH_MODEL in fresh_server.loaded_models()
    with pytest.raises(labkit.errors.MetricKindError) as info:  # now the counter is the one refused
        fresh_server.load(cm.MODEL)
    assert (info.value.kind, info.value.registered_kind, info.value.registered_by) == (
        "counter",
        "gauge",
        cm.CLASH_MODEL,
    )


def test_the_lesson_runs(lab):
    outcome = cm.run(lab)
    assert outcome.ok, outcome.record
    assert outcome.record["clash"] == {"metric": "lesson_requests", "kind": "gauge", "registered_kind": "counter"}
