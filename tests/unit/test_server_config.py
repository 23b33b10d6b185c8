"""The server's parts that are pure values: its config and Triton's command line rendered from it,
where it answers, and the one wait loop."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from labkit import WaitTimeoutError
from labkit.server.config import ServerConfig, TritonPlace, argv
from labkit.server.endpoints import Endpoints
from labkit.server.polling import wait_until


def test_triton_command_line_from_one_options_object():
    config = ServerConfig(shm_prefix="labkit_1_1_")
    line = argv(config, TritonPlace("/repo", "/backends", "127.0.0.1", 1, 2, 3), "/bin/tritonserver")
    assert line[0] == "/bin/tritonserver"
    for option in ("--model-repository=/repo", "--backend-directory=/backends", "--model-control-mode=explicit",
                   "--disable-auto-complete-config", "--http-address=127.0.0.1", "--grpc-port=2",
                   "--metrics-port=3", "--backend-config=python,shm-region-prefix-name=labkit_1_1_",
                   "--allow-gpu-metrics=false", "--exit-timeout-secs=5", "--strict-readiness=true"):
        assert option in line
    full = argv(ServerConfig(shm_prefix="p_", auto_complete=True, log_verbose=2, extra_args=["--x=1"]),
                TritonPlace("/r", "/b", "0.0.0.0", 8000, 8001, 8002, gpu_metrics=True))
    assert "--disable-auto-complete-config" not in full and "--allow-gpu-metrics=true" in full
    assert full[-1] == "--x=1" and "--log-verbose=2" in full and full[0] == "tritonserver"


def test_rendering_is_pure_and_the_config_frozen():
    config = ServerConfig(extra_args=["--a=1"])
    place = TritonPlace("/r", "/b", "127.0.0.1", 1, 2, 3)
    assert argv(config, place) == argv(config, place)
    assert config.extra_args == ("--a=1",)  # a tuple: the caller's list cannot change it later
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.load_timeout_s = 1  # type: ignore[misc]
    changed = config.with_(load_timeout_s=2, exit_timeout_s=9)
    assert (changed.load_timeout_s, config.load_timeout_s) == (2, 120.0)
    assert "--exit-timeout-secs=9" in argv(changed, place) and changed.shm_prefix == config.shm_prefix


def test_every_server_gets_its_own_shared_memory_prefix():
    assert ServerConfig().shm_prefix != ServerConfig().shm_prefix


def test_options_split_between_config_and_runtime():
    config, rest = ServerConfig.split({"load_timeout_s": 3, "image": "x", "env": {"A": "1"}, "auto_complete": True})
    assert (config.load_timeout_s, config.auto_complete) == (3, True)
    assert rest == {"image": "x", "env": {"A": "1"}}


def test_endpoints():
    where = Endpoints("127.0.0.1", 8000, 8001, 8002)
    assert (where.http_url, where.grpc_url, where.metrics_url) == (
        "127.0.0.1:8000", "127.0.0.1:8001", "http://127.0.0.1:8002/metrics")
    assert where.urls() == {"http": "http://127.0.0.1:8000", "grpc": "grpc://127.0.0.1:8001",
                            "metrics": "http://127.0.0.1:8002/metrics"}


def test_wait_until_returns_the_first_true_value_or_names_what_it_waited_for():
    count = itertools.count()
    assert wait_until(lambda: next(count) >= 3 and "done", 5.0, "three asks", interval_s=0.001) == "done"
    with pytest.raises(WaitTimeoutError) as caught:
        wait_until(lambda: False, 0.05, "the impossible", interval_s=0.01)
    assert (caught.value.what, caught.value.timeout_s) == ("the impossible", 0.05)

    def broken() -> bool:
        raise KeyError("ends the wait")

    with pytest.raises(KeyError):
        wait_until(broken, 5.0, "a predicate that raises")
