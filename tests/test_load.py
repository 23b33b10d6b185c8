"""labkit's load generator against a real Triton: both wires, changing concurrency while it runs,
per-request time limits, and a load that stops by itself when every worker is stuck."""

from __future__ import annotations

import time

import numpy as np
import pytest
from waiting_support import eventually

import labkit
from labkit.observe.stats import model_stats
from labkit.traffic.generator import Load, run_load

ONE = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}

SLEEPY = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            time.sleep(float(x[0]))  # the request says how long to take
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return out
"""


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_every_request_reaches_triton(server, protocol):
    before = model_stats(server, "add_sub", settle=True)
    result = run_load(server, "add_sub", ONE, requests=300, concurrency=4, protocol=protocol)
    served = model_stats(server, "add_sub", settle=True).since(before)
    assert result.count == 300 and result.errors == [] and result.protocol == protocol
    assert served.success_count == 300


def test_inputs_that_change_per_request(server):
    seen = []

    def inputs(i):
        seen.append(i)
        return {"INPUT0": np.full(4, i, np.float32), "INPUT1": np.ones(4, np.float32)}

    result = run_load(server, "add_sub", inputs, requests=50, concurrency=3)
    assert result.count == 50 and sorted(seen) == list(range(50))


def test_concurrency_changes_while_it_runs(server):
    load = Load(server, "add_sub", ONE, concurrency=1, duration_s=30).start()
    try:
        eventually(lambda: load.completions, "the first answers at concurrency 1", timeout_s=5)
        load.concurrency = 6
        eventually(lambda: load.workers >= 6, "six workers", timeout_s=5)
        assert load.workers == 6  # six workers, each with its connection
        load.concurrency = 2
        eventually(lambda: load.workers <= 2, "two workers left", timeout_s=5)
        assert load.workers == 2
    finally:
        result = load.stop()
    assert result.errors == [] and result.count > 0 and result.duration_s < 10
    finished, latencies = load.snapshot()
    assert finished.size == latencies.size == result.count


def test_slow_requests_count_as_timeouts_and_a_stuck_load_stops(fresh_server):
    cfg = labkit.model_config("sleepy", "python", [("X", "FP32", [1])], [("Y", "FP32", [1])])
    fresh_server.python_model("sleepy", SLEEPY, cfg)
    quick, slow = {"X": np.array([0.0], np.float32)}, {"X": np.array([4.0], np.float32)}
    assert run_load(fresh_server, "sleepy", quick, requests=5, timeout_s=2).errors == []

    t0 = time.monotonic()
    result = run_load(fresh_server, "sleepy", slow, requests=100, concurrency=2, timeout_s=0.5)
    assert time.monotonic() - t0 < 3.5  # not 100 requests x 4 s: it noticed that it was stuck
    assert result.stuck and result.count == 0
    assert 2 <= len(result.errors) < 100
    assert all("no answer within 0.5 s" in e.message and e.kind == "timeout" for e in result.errors)
    assert "every worker was stuck" in repr(result)
    assert labkit.check_add_sub(fresh_server).ok  # the server serves other models meanwhile


def test_default_time_limit_is_the_servers(server):
    assert Load(server, "add_sub", ONE).timeout_s == server.config.request_timeout_s
