"""Notebook 12's lessons (labkit.course.lessons.model_loading, bls_decoupled, bls_stateful, rescheduling,
request_parameters, python_logging, backend_attributes), each against a real Triton 23.12 started with
``--log-verbose=1`` as the notebook's is, with its failure paths: a rescheduled request Triton drops, a
refused async_exec, parameters labkit or the backend refuses."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
import labkit.errors
import labkit.server
from labkit.client.dropped import dropped_error
from labkit.course.lessons import (
    backend_attributes,
    bls_decoupled,
    bls_stateful,
    model_loading,
    python_logging,
    request_parameters,
    rescheduling,
)
from labkit.gpu import detect


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer(log_verbose=1) as srv:
        srv.start()
        yield srv


# -- 1. the model loading API ------------------------------------------------------------------------------


def test_a_bls_model_loads_reloads_and_unloads_a_model_given_as_config_and_files(lab):
    model_loading.setup(lab)
    if lab.models.is_model_ready(model_loading.LOADED):  # a rerun: start from nothing loaded
        model_loading.call(lab, 1.0, unload=True)
    first, same, other = (model_loading.call(lab, f, u) for f, u in ((2.0, False), (2.0, False), (3.0, True)))
    assert first.ready == [False, True, True] and first.loads == 1 and first.factor_loaded == "2.0"
    assert first.y == [2.0, 4.0, 6.0, 8.0] and first.serving and not first.in_index
    assert same.ready == [True, True, True] and same.loads == 0  # the same factor: no load, no reload
    assert other.ready == [True, True, False] and other.loads == 1 and other.y == [3.0, 6.0, 9.0, 12.0]
    assert not other.serving and other.factor_loaded is None
    assert all(step.ok for step in (first, same, other))


# -- 2. BLS over a decoupled model -------------------------------------------------------------------------


def test_bls_streams_every_response_of_a_decoupled_model_on(lab):
    bls_decoupled.setup(lab)
    result = bls_decoupled.doubled(lab, [4, 8, 15, 16])
    assert result.values == [8, 16, 30, 32] and result.indices == [0, 1, 2, 3] and result.ok
    assert bls_decoupled.doubled(lab, []).values == []  # repeat_py's only response is the empty final one


def test_async_exec_is_refused_in_a_decoupled_model(lab):
    bls_decoupled.setup(lab)
    with pytest.raises(labkit.errors.InferenceError) as refused:
        labkit.stream_infer(lab, bls_decoupled.REFUSED, {"IN": np.array([1, 2], np.int32)})
    assert refused.value.model == bls_decoupled.REFUSED
    assert bls_decoupled.ASYNC_REFUSAL in refused.value.reason
    assert bls_decoupled.doubled(lab, [1]).ok  # both keep serving


# -- 3. BLS over a stateful model --------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bls_hands_sequence_ids_and_flags_on_and_interleaved_sequences_keep_their_sums(lab, protocol):
    bls_stateful.setup(lab)
    mark = lab.logs.mark()
    result = bls_stateful.interleave(lab, {1: [3, 4, 5], 2: [10, -10, 7]}, protocol)
    assert result.sums == {1: [3, 7, 12], 2: [10, 0, 7]} and result.ok
    assert bls_stateful.handed_on(lab, mark) == [
        (1, True, False),
        (2, True, False),
        (1, False, False),
        (2, False, False),
        (1, False, True),
        (2, False, True),
    ]


def test_a_bls_request_without_a_sequence_id_gets_the_stateful_models_refusal(lab):
    bls_stateful.setup(lab)
    with pytest.raises(labkit.errors.InferenceError) as refused:
        labkit.infer(lab, bls_stateful.MODEL, {"INPUT": np.array([[1]], np.int32)})
    assert refused.value.model == bls_stateful.MODEL
    assert "must specify a non-zero or non-empty correlation ID" in refused.value.reason
    assert bls_stateful.interleave(lab, {5: [1, 1]}).ok


# -- 4. request rescheduling -------------------------------------------------------------------------------


def test_one_request_is_executed_once_per_step_when_rescheduled(lab):
    rescheduling.setup(lab)
    rounds = rescheduling.collatz(lab, 6)
    assert (rounds.steps, rounds.requests, rounds.executions) == (8, 1, 9) and rounds.ok
    assert rescheduling.collatz(lab, 1).executions == 1
    assert rescheduling.countdown(lab, 4) == [3, 2, 1, 0]


def test_a_rescheduled_request_without_iterative_sequences_ends_in_a_dropped_error(lab):
    rescheduling.setup(lab)
    with pytest.raises(labkit.errors.RequestDroppedError) as dropped:
        labkit.infer(lab, rescheduling.NOT_ITERATIVE, {"N": np.array([6], np.int32)}, timeout_s=60)
    assert dropped.value.model == rescheduling.NOT_ITERATIVE
    assert dropped.value.needs == "sequence_batching { iterative_sequence: true }"
    assert "not configured to handle such a flag" in dropped.value.reason
    assert lab.alive and rescheduling.collatz(lab, 3).ok  # nothing stuck: the others serve


def test_a_decoupled_stream_of_a_dropped_request_ends_the_same_way(lab):
    name = "countdown_not_iterative"
    lab.python_model(name, rescheduling.STREAM_SOURCE, rescheduling.config(name, iterative=False, decoupled=True))
    with pytest.raises(labkit.errors.RequestDroppedError) as dropped:
        labkit.stream_infer(lab, name, {"N": np.array([3], np.int32)}, timeout_s=60)
    assert dropped.value.model == name


def test_the_dropped_line_is_blamed_only_on_a_model_without_iterative_sequences(lab):
    """Triton's line names no model: a model whose config has iterative sequences is never blamed."""
    rescheduling.setup(lab)
    mark = lab.logs.mark()
    with pytest.raises(labkit.errors.RequestDroppedError):
        labkit.infer(lab, rescheduling.NOT_ITERATIVE, {"N": np.array([5], np.int32)}, timeout_s=60)
    assert dropped_error(lab, rescheduling.MODEL, mark) is None  # iterative: not it
    assert dropped_error(lab, rescheduling.NOT_ITERATIVE, mark) is not None
    assert dropped_error(lab, rescheduling.NOT_ITERATIVE, lab.logs.mark()) is None  # nothing since


# -- 5. request parameters ---------------------------------------------------------------------------------

SENT = {"scale": 3, "tag": "labkit", "strict": True}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_parameters_reach_python_and_cpp_with_their_types(lab, protocol):
    request_parameters.setup(lab)
    assert request_parameters.python_sees(lab, SENT, protocol) == SENT
    seen = request_parameters.cpp_answers(lab, SENT, protocol)
    assert seen.out == [3, 6, 9, 12] and seen.echoed == {"seen_scale": 3, "seen_tag": "labkit", "seen_strict": True}
    assert request_parameters.cpp_answers(lab, {}, protocol).echoed == {}


def test_sequence_fields_are_not_request_parameters(lab):
    request_parameters.setup(lab)
    assert request_parameters.python_sees(lab, {}) == {}
    out = labkit.infer(  # sequence_id, sequence_start and sequence_end are Triton's, not the model's parameters
        lab,
        request_parameters.PY_MODEL,
        {"IN0": request_parameters.VALUES},
        sequence_id=9,
        sequence_start=True,
        sequence_end=True,
        parameters={"k": 1},
    )
    assert out["PARAMS"][0] == b'{"k":1}'


def test_a_bls_request_passes_parameters_on(lab):
    request_parameters.setup(lab)
    assert request_parameters.through_bls(lab, {"scale": 5}) == [5, 10, 15, 20]
    assert request_parameters.through_bls(lab, {}) == [1, 2, 3, 4]


def test_the_backend_refuses_a_scale_that_is_not_an_integer(lab):
    request_parameters.setup(lab)
    with pytest.raises(labkit.errors.InferenceError) as refused:
        request_parameters.cpp_answers(lab, {"scale": "3"}, "grpc")
    assert refused.value.reason.endswith("reqparams: 'scale' must be an integer parameter")


@pytest.mark.parametrize(
    "parameters, value",
    [({"ratio": 0.5}, "0.5"), ({"sequence_id": 3}, "sequence_id"), ({"priority": 1}, "priority"), ({"l": [1]}, "[1]")],
)
def test_labkit_refuses_parameters_triton_would_refuse_before_sending(lab, parameters, value):
    request_parameters.setup(lab)
    mark = lab.logs.mark()
    with pytest.raises(labkit.errors.ConfigError) as refused:
        labkit.infer(lab, request_parameters.PY_MODEL, {"IN0": request_parameters.VALUES}, parameters=parameters)
    assert refused.value.field == "parameters" and refused.value.value == value
    assert "a request with" not in lab.logs.since(mark)  # nothing was sent


# -- 6. pb_utils.Logger ------------------------------------------------------------------------------------


def test_every_level_lands_in_the_log_and_verbose_only_at_verbose_level_one(lab):
    python_logging.setup(lab)
    assert python_logging.verbose_level(lab) == 1  # --log-verbose=1
    loud = python_logging.logged(lab, tag=41)
    assert loud.ok and {call: letter for call, (letter, _) in loud.lines.items()} == {
        "log_info": "I",
        "log_warn": "W",
        "log_error": "E",
        "log_verbose": "I",
        "log INFO": "I",
        "log WARNING": "W",
        "log ERROR": "E",
        "log VERBOSE": "I",
    }
    try:
        python_logging.set_verbose_level(lab, 0)
        quiet = python_logging.logged(lab, tag=42)
    finally:
        python_logging.set_verbose_level(lab, 1)
    assert quiet.ok and sorted(quiet.lines) == sorted(c for c, lv in python_logging.CALLS.items() if lv != "VERBOSE")


# -- 7. backend attributes, execution policy, memory usage ------------------------------------------------


def test_backend_attributes_policy_and_memory_reports_show_where_2312_shows_them(lab):
    parallel = backend_attributes.load(lab, parallel=True)
    serial = backend_attributes.load(lab, parallel=False)
    # KIND_GPU: two instances on each GPU, whose DEVICE_BLOCKING instances share one backend thread per GPU
    gpus = len(detect.probe().gpus)
    kind, count, threads = ("KIND_GPU", 2, (gpus, gpus)) if gpus else ("KIND_CPU", 3, (3, 0))
    instances = count * max(gpus, 1)
    for result in (parallel, serial):
        assert result.policy == "DEVICE_BLOCKING"
        assert (result.group["kind"], result.group["count"], result.group["name"]) == (kind, count, result.model)
        assert (result.gpus, result.instances) == (gpus, instances)
        assert result.backend_threads == threads
        assert result.memory_usage == [
            {
                "type": "CPU",
                "id": 0,
                "byte_size": backend_attributes.MODEL_BYTES + instances * backend_attributes.INSTANCE_BYTES,
            }
        ]
        assert result.ok
    assert parallel.threads == instances and serial.threads == 1
    grpc = lab.client("grpc")
    try:
        usage = grpc.get_inference_statistics(backend_attributes.MODEL).model_stats[0].memory_usage
    finally:
        grpc.close()
    assert [(u.type, u.byte_size) for u in usage] == [("CPU", parallel.memory_usage[0]["byte_size"])]
    per_model = [line for line in lab.models.metrics_text().splitlines() if f'model="{parallel.model}"' in line]
    assert per_model and not [line for line in per_model if "memory" in line]  # no metric carries it


def test_an_error_from_get_backend_attribute_is_never_seen_in_2312(lab):
    """backend_manager.cc:95 drops the status: the model loads, with Triton's default instance group."""
    opening = "TRITONBACKEND_BackendAttribute* attributes) {\n"
    assert opening in backend_attributes.SOURCE
    refusing = backend_attributes.SOURCE.replace(
        opening,
        opening + '  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "backendattrs: no attributes today");\n',
    )
    lab.repository.write_config(backend_attributes.config("attrs_refusing", "backendattrs_refusing"))
    lab.cpp_backend("backendattrs_refusing", refusing, ["attrs_refusing"])
    group = lab.model_config("attrs_refusing")["instance_group"][0]
    default_kind = "KIND_GPU" if detect.visible() else "KIND_CPU"  # KIND_AUTO, resolved
    assert (group["kind"], group["count"]) == (default_kind, 1)  # no preferred group was taken
    assert labkit.infer(lab, "attrs_refusing", {"IN0": np.array([1, 2, 3, 4], np.int32)})["OUT0"].tolist() == [
        1,
        2,
        3,
        4,
    ]
