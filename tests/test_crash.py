"""A server that dies is noticed at once, reported with its log, and restarted with its models."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import labkit
from labkit import reference

SEGFAULT = """
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch&) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;  // a backend bug: the whole server goes down with it
  });
}
"""


def _wait_for(predicate, timeout_s: float = 5.0) -> float:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError("timed out")
        time.sleep(0.01)
    return time.monotonic() - t0


def test_killed_server_is_noticed_and_restarted(fresh_server, capfd):
    reference.serve(fresh_server, ["minimal_batching"])
    old_pid = fresh_server.pid
    failures: list[BaseException] = []

    def load() -> None:
        try:
            labkit.run_load(fresh_server, "minimal_batching", reference.sample_inputs("minimal_batching"),
                            requests=10**6, concurrency=2, time_limit_s=30)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    worker = threading.Thread(target=load)
    worker.start()
    time.sleep(0.3)
    os.kill(old_pid, signal.SIGKILL)
    assert _wait_for(lambda: fresh_server.died is not None) < 2.0
    worker.join(timeout=10)
    assert not worker.is_alive(), "a request in flight hung instead of failing"
    assert isinstance(failures[0], labkit.ServerNotRunningError) and "killed by signal 9" in str(failures[0])
    with pytest.raises(labkit.ServerNotRunningError, match="killed by signal 9") as info:
        labkit.check_add_sub(fresh_server)
    assert "successfully loaded 'minimal_batching'" in info.value.log_tail
    assert "requests to minimal_batching were in flight" in capfd.readouterr().err

    assert fresh_server.restart() == ["add_sub", "minimal_batching"]
    assert fresh_server.pid != old_pid and fresh_server.died is None
    assert labkit.check_add_sub(fresh_server).ok
    assert labkit.check_passthrough(fresh_server, "minimal_batching", concurrent=2).ok


def test_segfaulting_backend_names_the_model(fresh_server, capfd):
    cfg = labkit.model_config("crasher", "crashy", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    fresh_server.repository.write_config(cfg)
    fresh_server.cpp_backend("crashy", SEGFAULT, ["crasher"], progress=False)
    with pytest.raises(labkit.ServerNotRunningError) as info:
        labkit.infer(fresh_server, "crasher", {"IN0": reference.np.zeros(4, reference.np.int32)})
    assert "The request to 'crasher' failed" in str(info.value) and "signal 11" in str(info.value)
    _wait_for(lambda: fresh_server.died is not None)
    assert "requests to crasher were in flight" in capfd.readouterr().err
    # back with both models; the crashing one would crash again, but add_sub serves
    assert fresh_server.restart() == ["add_sub", "crasher"]
    assert labkit.check_add_sub(fresh_server).ok
