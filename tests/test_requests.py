"""Requests to add_sub over HTTP and gRPC, and clear errors for bad ones."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import labkit
import labkit.errors


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_add_sub(server, protocol):
    result = labkit.check_add_sub(server, protocol=protocol)
    assert result.ok
    assert result.output0.tolist() == [1.5, 2.25, 5.0, 12.0]
    assert result.output1.tolist() == [0.5, 1.75, 1.0, -4.0]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_add_sub_batching(server, protocol):
    result = labkit.check_add_sub(server, "add_sub_batching", protocol, batch=3)
    assert result.ok and result.output0.shape == (3, 4)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_unknown_model(server, protocol):
    with pytest.raises(labkit.errors.ModelNotFoundError) as info:
        labkit.infer(server, "nosuch", {"INPUT0": np.zeros(4, np.float32)}, protocol=protocol)
    assert info.value.model == "nosuch" and "add_sub" in info.value.loaded


GOOD = np.zeros(4, np.float32)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    "inputs, phrase",
    [
        ({"INPUT0": GOOD.astype(np.int32), "INPUT1": GOOD}, "INPUT0"),  # wrong dtype
        ({"INPUT0": np.zeros(3, np.float32), "INPUT1": GOOD}, "INPUT0"),  # wrong shape
        ({"INPUT0": GOOD, "INPUTX": GOOD}, "INPUTX"),  # wrong input name
        ({"INPUT0": GOOD}, "INPUT1"),  # missing input
    ],
    ids=["dtype", "shape", "name", "missing"],
)
def test_bad_requests_are_request_errors(server, protocol, inputs, phrase):
    with pytest.raises(labkit.RequestError) as info:
        labkit.infer(server, "add_sub", inputs, protocol=protocol)
    assert info.value.model == "add_sub" and any(phrase in d for d in info.value.differs), info.value.differs
    assert labkit.check_add_sub(server, protocol=protocol).ok


def test_batch_over_max_is_refused(server):
    with pytest.raises(labkit.RequestError) as info:
        labkit.check_add_sub(server, "add_sub_batching", batch=9)
    assert any("batch" in d for d in info.value.differs), info.value.differs


MISSPELLED = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
"""


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_misspelled_output_name_is_an_error_listing_the_outputs(server, protocol):
    # the request misspells it
    with pytest.raises(labkit.errors.OutputNameError) as asked:
        labkit.infer(server, "add_sub", {"INPUT0": GOOD, "INPUT1": GOOD}, ["OUTPUT0", "OUTPT1"], protocol=protocol)
    assert asked.value.model == "add_sub" and asked.value.missing == ["OUTPT1"]
    assert asked.value.outputs == ["OUTPUT0", "OUTPUT1"]
    # the model misspells it: Triton drops the tensor, and the answer would be empty
    server.repository.write_config(
        labkit.model_config("misspelled", "python", [("INPUT0", "FP32", [4])], [("OUTPUT0", "FP32", [4])])
    )
    server.python_model("misspelled", MISSPELLED)
    with pytest.raises(labkit.errors.OutputNameError) as declared:
        labkit.infer(server, "misspelled", {"INPUT0": GOOD}, protocol=protocol)
    assert (
        declared.value.missing == ["OUTPUT0"]
        and declared.value.outputs == ["OUTPUT0"]
        and declared.value.produced == []
    )
    with pytest.raises(labkit.errors.OutputNameError) as requested:
        labkit.infer(server, "misspelled", {"INPUT0": GOOD}, ["OUTPUT0"], protocol=protocol)
    assert requested.value.missing == ["OUTPUT0"]
    assert labkit.check_add_sub(server, protocol=protocol).ok


ECHO = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
"""


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_input_declaring_more_than_it_carries_is_refused_before_sending(server, protocol):
    """1 GiB declared, 16 bytes carried: Triton 23.12 would hand it to the Python stub, which dies of it."""
    module = httpclient if protocol == "http" else grpcclient
    for dtype, triton in ((np.float32, "FP32"), (object, "BYTES")):
        name = f"echo_{triton.lower()}"
        server.repository.write_config(
            labkit.model_config(name, "python", [("IN", triton, [-1])], [("OUT", triton, [-1])])
        )
        server.python_model(name, ECHO)
        data = np.array([1, 2, 3, 4], np.float32) if dtype is np.float32 else np.array([b"ab", b"cd"], dtype=object)
        tensor = module.InferInput("IN", list(data.shape), triton)
        tensor.set_data_from_numpy(data)
        tensor.set_shape([1 << 28])
        before = labkit.model_stats(server, name, settle=True)
        with pytest.raises(labkit.errors.InputSizeError) as info:
            labkit.infer(server, name, {"IN": tensor}, protocol=protocol)
        assert info.value.model == name and info.value.input == "IN"
        if triton == "FP32":
            assert (info.value.needed, info.value.carried, info.value.unit) == (1 << 30, 16, "bytes")
        else:
            assert (info.value.needed, info.value.carried, info.value.unit) == (1 << 28, 2, "strings")
        delta = labkit.model_stats(server, name, settle=True).since(before)
        assert delta.success_count == 0 and delta.fail_count == 0  # nothing reached Triton
        right = module.InferInput("IN", list(data.shape), triton)
        right.set_data_from_numpy(data)
        assert labkit.infer(server, name, {"IN": right}, protocol=protocol)["OUT"].tolist() == data.tolist()
