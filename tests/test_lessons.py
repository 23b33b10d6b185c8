"""The backend-API lessons (labkit.course.lessons), each exercised against a real Triton 23.12."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import labkit
import labkit.server
from labkit.course.lessons import (
    artifacts,
    auto_complete,
    bls,
    decoupled,
    response_parameters,
    volume_batching,
)
from labkit.course.tour import api_tour_section
from labkit.native import build_backend
from labkit.native.build import exported_symbols
from labkit.server.server_config import TritonPlace, argv


@pytest.fixture(scope="module")
def lab():
    """One server (auto-complete off, as labkit's always are) for lessons 1-5."""
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        yield srv


@pytest.fixture(scope="module")
def auto_lab():
    """A server with auto-complete on, for lesson 6 only."""
    srv = auto_complete.start_server()
    try:
        yield srv
    finally:
        srv.stop()


# -- 1. custom batching strategy -------------------------------------------------------------------


def test_volume_cap_holds_in_statistics_while_default_batcher_goes_further(lab):
    result = volume_batching.compare(lab, max_bytes=48, requests=48, concurrency=8)
    assert result.cap_requests == 3
    assert result.volume.inference_count == result.default.inference_count == 48
    assert result.volume.batch_counts and max(result.volume.batch_counts) <= 3, result.volume.batch_counts
    assert max(result.default.batch_counts) > 3, result.default.batch_counts
    assert result.ok
    assert lab.logs.grep("minimal_volume: batches capped at 48 bytes of input")


def test_new_limit_takes_effect_on_reload(lab):
    result = volume_batching.compare(lab, max_bytes=5 * volume_batching.REQUEST_BYTES)
    assert result.cap_requests == 5
    assert max(result.volume.batch_counts) <= 5 and result.ok
    assert lab.logs.grep("batches capped at 80 bytes of input")


def test_rebuilt_strategy_gets_a_new_path(lab):
    volume_batching.compare(lab)  # make sure both models serve
    first = (
        lab.repository.read_config(volume_batching.VOLUME_MODEL).parameters["TRITON_BATCH_STRATEGY_PATH"].string_value
    )
    edited = volume_batching.STRATEGY_SOURCE + "\n// an edit: a new build\n"
    mark = lab.logs.mark()
    second = volume_batching.attach(lab, volume_batching.VOLUME_MODEL, volume_batching.build_strategy(lab, edited), 48)
    assert str(second) != first
    assert second.exists() and not Path(first).exists()  # the old copy is gone
    assert f"Loading custom batching strategy library {second}" in lab.logs.since(mark)
    assert max(volume_batching.burst(lab, volume_batching.VOLUME_MODEL).batch_counts) <= 3


# Four of the five batching entry points, without labkit/backend.hpp: compiles in a moment.
FOUR_OF_FIVE = """#include "triton/core/tritonbackend.h"
TRITONSERVER_Error* TRITONBACKEND_ModelBatcherInitialize(TRITONBACKEND_Batcher**, TRITONBACKEND_Model*) { return nullptr; }
TRITONSERVER_Error* TRITONBACKEND_ModelBatcherFinalize(TRITONBACKEND_Batcher*) { return nullptr; }
TRITONSERVER_Error* TRITONBACKEND_ModelBatchInitialize(const TRITONBACKEND_Batcher*, void**) { return nullptr; }
TRITONSERVER_Error* TRITONBACKEND_ModelBatchFinalize(void*) { return nullptr; }
"""


def test_strategy_build_checks_the_batching_entry_points(tmp_path):
    with pytest.raises(labkit.BuildError) as info:
        build_backend("strategy", FOUR_OF_FIVE, cache=tmp_path, progress=False, required=volume_batching.ENTRY_POINTS)
    assert info.value.missing_exports == ["TRITONBACKEND_ModelBatchIncludeRequest"]
    # a backend build still asks for ModelInstanceExecute, and nothing else
    with pytest.raises(labkit.BuildError) as info:  # "the one entry point Triton requires": test_error_messages
        build_backend("strategy", FOUR_OF_FIVE, cache=tmp_path, progress=False)
    assert info.value.missing_exports == ["TRITONBACKEND_ModelInstanceExecute"]
    complete = FOUR_OF_FIVE + (
        "TRITONSERVER_Error* TRITONBACKEND_ModelBatchIncludeRequest(TRITONBACKEND_Request*, void*, bool* include) "
        "{ *include = true; return nullptr; }\n"
    )
    build = build_backend("strategy", complete, cache=tmp_path, progress=False, required=volume_batching.ENTRY_POINTS)
    assert set(volume_batching.ENTRY_POINTS) <= exported_symbols(build.library)


def test_bad_limit_fails_the_load_with_the_parameter_named(lab):
    volume_batching.compare(lab)
    repo = lab.repository
    cfg = repo.read_config(volume_batching.VOLUME_MODEL)
    cfg.parameters["MAX_BATCH_VOLUME_BYTES"].string_value = "lots"
    repo.write_config(cfg)
    with pytest.raises(labkit.ModelLoadError) as info:
        lab.load(volume_batching.VOLUME_MODEL)
    assert info.value.model == volume_batching.VOLUME_MODEL
    assert "MAX_BATCH_VOLUME_BYTES must be a whole number" in info.value.reason, info.value.reason
    volume_batching.compare(lab)  # puts a good limit back


# -- 2. BLS ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bls_lab(lab):
    bls.setup(lab)
    return lab


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bls_calls_both_models_sync_and_async(bls_lab, protocol):
    result = bls.call(bls_lab, protocol)
    np.testing.assert_allclose(result.outputs["OUTPUT0"], result.input0 + result.input1)
    np.testing.assert_allclose(result.outputs["OUTPUT1"], result.input0 - result.input1)
    np.testing.assert_array_equal(result.outputs["ECHO"], result.input0.astype(np.int32))
    assert result.calls == {"add_sub": 1, "minimal_nonbatching": 1}  # from each callee's own statistics
    assert result.ok


@pytest.mark.parametrize("callee", bls.CALLEES)
def test_bls_missing_model_gives_a_clear_error(bls_lab, callee):
    message = bls.missing_callee_error(bls_lab, callee)
    assert f"BLS call from bls_demo to model '{callee}' failed" in message
    assert f"Load '{callee}'" in message
    assert callee in bls_lab.loaded_models() and bls.call(bls_lab).ok  # back and serving


# -- 3. decoupled ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def decoupled_lab(lab):
    decoupled.setup(lab)
    return lab


@pytest.mark.parametrize("values", [[4, 8, 15, 16, 23, 42], [7], [], list(range(100, 150))])
def test_decoupled_responses_counted_and_in_order(decoupled_lab, values):
    result = decoupled.repeat(decoupled_lab, values)
    assert len(result.values) == len(values)
    assert result.values == values and result.indices == list(range(len(values)))
    assert result.ok


def test_decoupled_model_is_refused_over_http(decoupled_lab):
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(decoupled_lab, decoupled.MODEL, {"IN": np.array([1, 2], np.int32)})
    assert "decoupled" in info.value.reason, info.value


def test_stream_helper_also_takes_an_ordinary_model(decoupled_lab):
    decoupled_lab.repository.copy_model_from(labkit.reference_repository(), "add_sub")
    decoupled_lab.load("add_sub")
    ones = np.ones(4, np.float32)
    responses = labkit.stream_infer(decoupled_lab, "add_sub", {"INPUT0": ones, "INPUT1": ones})
    assert len(responses) == 1 and responses[0]["OUTPUT0"].tolist() == [2.0] * 4


# -- 4. response parameters ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def params_lab(lab):
    response_parameters.setup(lab)
    return lab


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_response_parameters_reach_the_client(params_lab, protocol):
    result = response_parameters.ask(params_lab, protocol, [1, 2, 3, 4])
    assert result.echoed.tolist() == [1, 2, 3, 4]
    p = result.parameters
    assert p["served_by"] == f"labkit {response_parameters.MODEL}"
    assert p["requests_in_batch"] == 1 and type(p["requests_in_batch"]) is int
    assert p["all_positive"] is True
    assert response_parameters.ask(params_lab, protocol, [1, -2, 3, 4]).parameters["all_positive"] is False
    assert result.ok


# -- 5. model artifacts ----------------------------------------------------------------------------


def test_missing_artifact_fails_the_load_saying_where(lab):
    with pytest.raises(labkit.ModelLoadError) as info:
        artifacts.setup(lab, scale=None)
    message = info.value.reason  # Triton's words: the model's own exception
    assert info.value.model == artifacts.MODEL
    expected = lab.repository.model_dir(artifacts.MODEL) / artifacts.ARTIFACT
    assert f"{expected} does not exist" in message and "write a number into it" in message
    assert artifacts.MODEL not in lab.loaded_models()


def test_artifact_is_read_at_load(lab):
    artifacts.setup(lab, scale=2.5)
    result = artifacts.scaled(lab, [1.0, 2.0, 3.0, 4.0])
    assert result.received.tolist() == [2.5, 5.0, 7.5, 10.0] and result.ok
    artifacts.write_scale(lab, -0.5)
    assert artifacts.scaled(lab).received.tolist() == [2.5, 5.0, 7.5, 10.0]  # read at load, not per request
    lab.load(artifacts.MODEL)
    assert artifacts.scaled(lab, [2.0, 4.0, 6.0, 8.0]).received.tolist() == [-1.0, -2.0, -3.0, -4.0]


def test_unreadable_artifact_is_refused_and_the_old_version_keeps_serving(lab):
    artifacts.setup(lab, scale=3.0)
    lab.repository.write_file(artifacts.MODEL, artifacts.ARTIFACT, "three", version=None)
    with pytest.raises(labkit.ModelLoadError) as info:
        lab.load(artifacts.MODEL)
    assert "must hold one number, not 'three'" in info.value.reason, info.value.reason
    out = labkit.infer(lab, artifacts.MODEL, {"IN0": np.ones(4, np.float32)})["OUT0"]
    assert out.tolist() == [3.0] * 4


# -- 6. auto-complete ------------------------------------------------------------------------------


def test_embedded_server_keeps_auto_complete_off_unless_asked():
    place = TritonPlace("/r", "/b", "127.0.0.1", 1, 2, 3)
    for options, flag_there in (({}, True), ({"auto_complete": True}, False)):
        server = labkit.server.EmbeddedServer(**options)
        assert ("--disable-auto-complete-config" in argv(server.config, place)) is flag_there
        server.stop()  # never started: removes its work folder


def test_cpp_backend_completes_its_config(auto_lab):
    config = auto_complete.setup_cpp(auto_lab)  # read back from the server
    assert auto_complete.tensors(config) == {
        "max_batch_size": 4,  # the server's default-max-batch-size
        "inputs": ["IN0 FP32 [4]"],
        "outputs": ["OUT0 FP32 [4]"],
        "dynamic_batching": False,
    }
    out = labkit.infer(auto_lab, auto_complete.CPP_MODEL, {"IN0": np.ones((3, 4), np.float32)})["OUT0"]
    assert out.tolist() == [[2.0] * 4] * 3
    assert auto_lab.logs.grep("autofill_cpp: auto-completed inputs outputs max_batch_size")


def test_python_auto_complete_config(auto_lab):
    config = auto_complete.setup_python(auto_lab)
    assert auto_complete.tensors(config) == {
        "max_batch_size": 8,
        "inputs": ["X FP32 [4]"],
        "outputs": ["Y FP32 [4]"],
        "dynamic_batching": True,
    }
    out = labkit.infer(auto_lab, auto_complete.PY_MODEL, {"X": np.full((2, 4), 1.5, np.float32)})["Y"]
    assert out.tolist() == [[3.0] * 4] * 2


def test_with_auto_complete_off_the_cpp_backend_says_what_to_do(lab):
    with pytest.raises(labkit.ModelLoadError) as info:
        auto_complete.setup_cpp(lab)
    assert "auto_complete=True" in info.value.reason, info.value.reason


def test_with_auto_complete_off_the_python_hook_never_runs(lab):
    config = auto_complete.setup_python(lab)  # Triton loads it, but nobody filled the config in
    assert auto_complete.tensors(config)["inputs"] == [] and config.get("max_batch_size", 0) == 0
    with pytest.raises(labkit.RequestError):
        labkit.infer(lab, auto_complete.PY_MODEL, {"X": np.ones(4, np.float32)})


# -- the demo section ------------------------------------------------------------------------------


def test_api_tour_section_reports_ok_per_item(tmp_path):
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        report = api_tour_section(srv, tmp_path)
    assert set(report) == {
        "volume_batching",
        "bls",
        "decoupled",
        "response_parameters",
        "artifacts",
        "auto_complete",
        "stateful",
        "instances",
        "decoupled_cpp",
        "cancellation",
        "model_loading",
        "bls_decoupled",
        "bls_stateful",
        "rescheduling",
        "request_parameters",
        "python_logging",
        "backend_attributes",
        "ok",
    }
    assert all(report[k]["ok"] for k in report if k != "ok"), report
    assert report["ok"] and (tmp_path / "api_tour_volume_batching.png").stat().st_size > 0
