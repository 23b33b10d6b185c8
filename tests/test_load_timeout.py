"""A model whose initialization never returns: the load ends at its time limit with a
LoadTimeoutError that shows the stuck line, the server keeps serving, and (Python) the fixed model
loads in the same server; stop() ends whatever is still stuck."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from stuck_support import CONFIG, SLEEPS, STUCK_LINE, X, initializing

import labkit
import labkit.server

pytestmark = pytest.mark.slow

# Stuck below Python, where the stub cannot be asked to leave: labkit ends the stub instead.
DEADLOCKS = (
    "import ctypes; libc = ctypes.CDLL(None); m = ctypes.create_string_buffer(64); "
    "libc.pthread_mutex_init(m, None); libc.pthread_mutex_lock(m); libc.pthread_mutex_lock(m)"
)


def _running_in_group(pgid: int) -> list[int]:
    """The processes of a process group that still run (ended ones may wait a moment to be reaped)."""
    running = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            running.append(int(stat.parent.name))
    return running


def _serves_the_fix(server: labkit.server.TritonServer) -> None:
    server.python_model("hang", initializing("pass"))
    assert labkit.infer(server, "hang", X, timeout_s=10)["OUT0"].tolist() == [7.0] * 4
    assert server.loaded_models() == ["add_sub", "hang"] and labkit.check_add_sub(server).ok


def test_a_sleeping_initialize_times_out_at_its_line_and_the_fix_loads_in_the_same_server():
    with labkit.start(load_timeout_s=2) as lab:
        lab.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        lab.load("add_sub")
        pid = lab.runtime.triton_pid
        lab.repository.write_config(CONFIG)
        with pytest.raises(labkit.LoadTimeoutError) as info:
            lab.python_model("hang", initializing(SLEEPS))
        err = info.value
        assert isinstance(err, labkit.ModelLoadError)
        assert err.model == "hang" and err.timeout_s == 2 and err.ended and not err.interrupted
        assert err.location == f"model.py:{STUCK_LINE}"
        assert f"model.py:{STUCK_LINE} in TritonPythonModel.initialize:  {SLEEPS}" in err.stack
        assert "labkit ended this load after load_timeout_s=2 s" in err.reason  # Triton's words for the failed load
        assert "timeout_s=" in err.remedy and "load_timeout_s" in err.remedy
        assert lab.loaded_models() == ["add_sub"] and labkit.check_add_sub(lab).ok
        _serves_the_fix(lab)
        assert lab.runtime.triton_pid == pid  # the same server all along
        lab.python_model("hang", initializing(SLEEPS), load=False)
        with pytest.raises(labkit.LoadTimeoutError):  # a reload that hangs: the old code keeps serving
            lab.load("hang")
        assert labkit.infer(lab, "hang", X, timeout_s=10)["OUT0"].tolist() == [7.0] * 4
    assert not lab.alive and _running_in_group(pid) == []


def test_the_limit_can_be_set_per_call_and_a_stub_stuck_below_python_is_ended(fresh_server):
    assert fresh_server.config.load_timeout_s == 120  # the default
    fresh_server.repository.write_config(CONFIG)
    with pytest.raises(labkit.LoadTimeoutError) as info:
        fresh_server.python_model("hang", initializing(DEADLOCKS), load_timeout_s=1.5)
    assert info.value.timeout_s == 1.5 and info.value.ended
    assert info.value.location == f"model.py:{STUCK_LINE}"
    assert labkit.check_add_sub(fresh_server).ok
    with pytest.raises(labkit.LoadTimeoutError) as info:
        fresh_server.load("hang", timeout_s=1)
    assert info.value.timeout_s == 1 and info.value.ended
    _serves_the_fix(fresh_server)


def test_a_kernel_interrupt_ends_the_stuck_load_the_same_way(fresh_server, kernel_interrupts):
    fresh_server.repository.write_config(CONFIG)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(labkit.LoadTimeoutError) as info:
        fresh_server.python_model("hang", initializing(SLEEPS))  # the default limit, 120 s
    timer.join()
    assert info.value.interrupted and info.value.ended and info.value.timeout_s == 120
    assert info.value.location == f"model.py:{STUCK_LINE}"
    _serves_the_fix(fresh_server)


HANGING_CPP = r"""
#include <unistd.h>
#include "labkit/backend.hpp"
struct Slow : labkit::ModelState {
  explicit Slow(TRITONBACKEND_Model* model) : labkit::ModelState(model) {
    while (HANGS) {
      sleep(1);  // the initialization never ends
    }
  }
};
LABKIT_MODEL_STATE(Slow)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor in = batch.input("IN0");
    batch.output("OUT0", in);
  });
}
"""
CPP_STUCK_LINE = 7


def test_a_cpp_model_initialize_that_never_returns_times_out_and_the_server_keeps_serving(fresh_server):
    cfg = labkit.model_config("slow", "slowinit", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    fresh_server.repository.write_config(cfg)
    fresh_server.config = fresh_server.config.with_(load_timeout_s=2)
    with pytest.raises(labkit.LoadTimeoutError) as info:
        fresh_server.cpp_backend("slowinit", HANGING_CPP.replace("HANGS", "true"), ["slow"], progress=False)
    err = info.value
    assert err.model == "slow" and err.timeout_s == 2 and not err.ended  # a thread inside Triton
    assert err.location == f"slowinit.cc:{CPP_STUCK_LINE}"
    assert f"slowinit.cc:{CPP_STUCK_LINE} in Slow::Slow" in err.stack  # not ended: lab.restart() (its message says)
    assert labkit.check_add_sub(fresh_server).ok and fresh_server.loaded_models() == ["add_sub"]
    assert [m["state"] for m in fresh_server.models.index() if m["name"] == "slow"] == ["LOADING"]

    assert fresh_server.restart() == ["add_sub"]  # what the error offers
    fresh_server.cpp_backend("slowinit", HANGING_CPP.replace("HANGS", "false"), ["slow"], progress=False)
    x = {"IN0": np.arange(4, dtype=np.int32)}
    assert labkit.infer(fresh_server, "slow", x)["OUT0"].tolist() == [0, 1, 2, 3]


def test_stop_ends_a_server_whose_model_is_stuck_loading(fresh_server):
    """stop() gives the models a moment to finalize, then ends the server: a thread stuck in a C++
    ModelInitialize and a Python model stuck in a request do not keep it (or its stubs) alive."""
    cfg = labkit.model_config("slow", "slowinit", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    fresh_server.repository.write_config(cfg)
    fresh_server.config = fresh_server.config.with_(load_timeout_s=1)
    with pytest.raises(labkit.LoadTimeoutError):
        fresh_server.cpp_backend("slowinit", HANGING_CPP.replace("HANGS", "true"), ["slow"], progress=False)
    fresh_server.repository.write_config(CONFIG)
    fresh_server.python_model(
        "hang", initializing("pass").replace("return [pb_utils", "time.sleep(100000)\n        return [pb_utils")
    )
    with pytest.raises(labkit.RequestTimeoutError):
        labkit.infer(fresh_server, "hang", X, timeout_s=1)
    pid = fresh_server.runtime.triton_pid
    fresh_server.stop()
    assert not fresh_server.alive and _running_in_group(pid) == []
