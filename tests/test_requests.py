"""Requests to add_sub over HTTP and gRPC, and clear errors for bad ones."""

from __future__ import annotations

import numpy as np
import pytest

import labkit


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
    with pytest.raises(labkit.ModelNotFoundError, match="'nosuch' is not loaded.*add_sub"):
        labkit.infer(server, "nosuch", {"INPUT0": np.zeros(4, np.float32)}, protocol=protocol)


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
    assert phrase in str(info.value) and "model_config('add_sub')" in str(info.value)
    assert labkit.check_add_sub(server, protocol=protocol).ok


def test_batch_over_max_is_refused(server):
    with pytest.raises(labkit.RequestError, match="batch"):
        labkit.check_add_sub(server, "add_sub_batching", batch=9)
