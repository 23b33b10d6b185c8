"""Decoupled models over HTTP (labkit.generate_stream, Triton's generate extension) against a real
Triton 23.12: the same responses as the gRPC stream, and its refusals as labkit errors with fields."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import labkit
import labkit.errors
import labkit.server
from labkit.course.exercises.nb07 import collatz
from labkit.course.lessons import decoupled


@pytest.fixture(scope="module")
def decoupled_lab():
    """One server with repeat_py, the lesson's decoupled model."""
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        decoupled.setup(srv)
        yield srv


COLLATZ_CONFIG = labkit.model_config(
    "collatz", "python", [("N", "INT32", [1])], [("VALUE", "INT32", [1]), ("STEPS", "INT32", [1])]
)
COLLATZ_CONFIG.model_transaction_policy.decoupled = True


@pytest.fixture(scope="module")
def collatz_lab(decoupled_lab):
    """The 07-countdown exercise's reference solution: as many responses as N's Collatz sequence has values,
    the last carrying a second output and the final flag."""
    cell = labkit.course.exercises.REGISTRY["07-countdown"].solution()
    decoupled_lab.python_model("collatz", cell.split("\n", 1)[1], COLLATZ_CONFIG)
    return decoupled_lab


def _grpc_as_json(responses):
    """stream_infer's responses as the generate extension writes them (one element: a plain value)."""
    return [{name: value.item() if value.size == 1 else value.tolist() for name, value in r.items()} for r in responses]


@pytest.mark.parametrize("value", [4, [4], np.array([4], np.int32), [[-7]]])
def test_generate_stream_over_http_equals_the_grpc_stream(decoupled_lab, value):
    over_http = labkit.generate_stream(decoupled_lab, decoupled.MODEL, {"IN": value})
    over_grpc = labkit.stream_infer(decoupled_lab, decoupled.MODEL, {"IN": np.ravel(np.asarray(value, np.int32))})
    assert over_http == _grpc_as_json(over_grpc)
    assert len(over_http) == 1 and over_http[0]["IDX"] == 0


@pytest.mark.parametrize("n", [6, 1, 27])
def test_generate_stream_carries_several_responses_in_order(collatz_lab, n):
    over_http = labkit.generate_stream(collatz_lab, "collatz", {"N": n})
    over_grpc = labkit.stream_infer(collatz_lab, "collatz", {"N": np.array([n], np.int32)})
    assert [r["VALUE"] for r in over_http] == collatz(n)
    assert [r.get("STEPS") for r in over_http] == [None] * (len(over_http) - 1) + [len(over_http) - 1]
    assert over_http == _grpc_as_json(over_grpc)


@pytest.mark.parametrize("value, count", [([4, 8, 15], 3), ([], 0)])
def test_generate_stream_refuses_other_than_one_element_as_a_request_error(decoupled_lab, value, count):
    with pytest.raises(labkit.RequestError) as info:
        labkit.generate_stream(decoupled_lab, decoupled.MODEL, {"IN": value})
    err = info.value
    assert err.model == decoupled.MODEL and err.reason  # Triton's own words for the refusal
    assert len(err.differs) == 1 and err.differs[0].startswith(f"IN carries {count} elements"), err.differs
    # The same values in one request over gRPC: one response per element.
    assert decoupled.repeat(decoupled_lab, value).ok


def test_generate_stream_names_a_missing_input_a_wrong_kind_and_what_json_cannot_carry(decoupled_lab):
    with pytest.raises(labkit.RequestError) as info:
        labkit.generate_stream(decoupled_lab, decoupled.MODEL, {})
    assert len(info.value.differs) == 1 and "'IN' is missing" in info.value.differs[0], info.value.differs
    with pytest.raises(labkit.RequestError) as info:
        labkit.generate_stream(decoupled_lab, decoupled.MODEL, {"IN": "four"})
    assert len(info.value.differs) == 1 and "JSON string" in info.value.differs[0], info.value.differs
    with pytest.raises(labkit.RequestError) as info:  # not JSON at all: refused before sending
        labkit.generate_stream(decoupled_lab, decoupled.MODEL, {"IN": b"\x04"})
    # labkit refused it, not Triton: nothing was sent
    assert info.value.model == decoupled.MODEL and info.value.refused_by == "labkit" and len(info.value.differs) == 1


def test_generate_stream_to_a_model_not_loaded(decoupled_lab):
    with pytest.raises(labkit.errors.ModelNotFoundError) as info:
        labkit.generate_stream(decoupled_lab, "no_such_model", {"IN": 4})
    assert info.value.model == "no_such_model" and decoupled.MODEL in info.value.loaded


FAILING_SOURCE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], dtype=np.int32))]))
            sender.send(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("no second answer")))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def test_an_error_response_in_the_http_stream_is_an_inference_error(decoupled_lab):
    config = labkit.model_config("fails_second", "python", [("N", "INT32", [1])], [("OUT", "INT32", [1])])
    config.model_transaction_policy.decoupled = True
    decoupled_lab.python_model("fails_second", FAILING_SOURCE, config)
    with pytest.raises(labkit.InferenceError) as info:
        labkit.generate_stream(decoupled_lab, "fails_second", {"N": 1})
    assert type(info.value) is labkit.InferenceError
    assert info.value.model == "fails_second" and info.value.reason == "no second answer"


PARAMETERS_SOURCE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("P", np.array([request.parameters()], dtype=object))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def test_a_generate_field_that_names_no_input_is_a_request_parameter(decoupled_lab):
    config = labkit.model_config("echo_params", "python", [("N", "INT32", [1])], [("P", "BYTES", [1])])
    config.model_transaction_policy.decoupled = True
    decoupled_lab.python_model("echo_params", PARAMETERS_SOURCE, config)
    responses = labkit.generate_stream(decoupled_lab, "echo_params", {"N": 1, "temperature": 7, "style": "terse"})
    assert [json.loads(r["P"]) for r in responses] == [{"temperature": 7, "style": "terse"}]


def test_generate_stream_waits_within_its_time_limit_and_then_lets_the_stream_go():
    config = labkit.model_config("never_final", "python", [("N", "INT32", [1])], [("OUT", "INT32", [1])])
    config.model_transaction_policy.decoupled = True
    source = FAILING_SOURCE.replace(
        '            sender.send(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("no second answer")))\n'
        "            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n",
        "",
    )
    assert "COMPLETE_FINAL" not in source
    with (
        labkit.server.EmbeddedServer() as srv
    ):  # a request that never ends keeps its model from unloading: a server of its own
        srv.start()
        srv.python_model("never_final", source, config)
        with pytest.raises(labkit.RequestTimeoutError) as info:
            labkit.generate_stream(srv, "never_final", {"N": 1}, timeout_s=1)
        assert info.value.model == "never_final" and info.value.limit_s == 1
        for thread in [t for t in threading.enumerate() if t.name == "labkit-generate-never_final"]:
            thread.join(timeout=5)
            assert not thread.is_alive()  # the time limit closed the connection, and the reader with it
