"""A user's tests of their own model, as the README shows them: nothing but the `triton` fixture."""

import numpy as np


def test_doubler_doubles(triton):
    out = triton.infer("doubler", {"X": np.array([1, 2, 3], np.float32)})
    assert out["Y"].tolist() == [2, 4, 6]


def test_doubler_over_grpc(triton):
    assert triton.endpoints.grpc_port and triton.endpoints.http_port
    assert "doubler" in triton.loaded_models()
    out = triton.infer("doubler", {"X": np.array([-1.5], np.float32)}, protocol="grpc")
    assert out["Y"].tolist() == [-3.0]
