"""A stuck model explains itself: time limits on requests, the live stack at the stuck line (model.py
through py-spy, C++ cells through eu-stack), lab.unstick(), and stubs that end themselves reported
with their exit code or signal and where. Every test checks that the server keeps serving add_sub."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from stuck_support import CONFIG, HANG_LINE, SPIN_LINE, SPINNING, X, hanging
from waiting_support import never

import labkit
import labkit.errors
from labkit import debug_tools
from labkit.stuck.python_stack import python_stack, stub_processes

pytestmark = pytest.mark.slow


EXITING = """import os
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        print("initialize: leaving now")
        os._exit(3)

    def execute(self, requests):
        return []
"""


def test_the_debugging_tools_are_installed():
    assert all(tool.found for tool in debug_tools()), [str(t) for t in debug_tools()]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_sleeping_execute_times_out_at_its_line_and_unstick_serves_the_fix(fresh_server, protocol):
    fresh_server.repository.write_config(CONFIG)
    fresh_server.python_model("hang", hanging(1, "time.sleep(100000)"))
    t0 = time.monotonic()
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.infer(fresh_server, "hang", X, protocol=protocol, timeout_s=2)
    waited = time.monotonic() - t0
    assert 2 <= waited < 2 + 3, waited
    err = info.value
    assert err.model == "hang" and err.limit_s == 2
    assert f"model.py:{HANG_LINE} in TritonPythonModel.execute:  time.sleep(100000)" in err.stack
    assert not err.restart_needed  # lab.unstick('hang') ends it (its message: test_error_messages)
    assert labkit.check_add_sub(fresh_server).ok  # another model serves meanwhile

    fresh_server.repository.write_python_model("hang", hanging(7, "pass"))
    report = fresh_server.unstick("hang")
    assert "hang_0_0" in report
    assert labkit.infer(fresh_server, "hang", X, protocol=protocol, timeout_s=5)["OUT0"].tolist() == [7.0] * 4
    # A negative check, kept honest: a killed stub would be restarted by Triton within about 2.5 s and
    # crash it (no event says "will not crash"), so watch the server that long and fail the moment it dies.
    never(lambda: not fresh_server.alive, "the server died after unstick", for_s=2.5)
    assert fresh_server.alive and labkit.check_add_sub(fresh_server).ok
    assert fresh_server.loaded_models() == ["add_sub", "hang"]


def test_the_server_default_limit_applies_to_helpers(fresh_server):
    fresh_server.config = fresh_server.config.with_(request_timeout_s=1.5)
    fresh_server.python_model("add_sub", hanging(0, "time.sleep(100000)"))
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.check_add_sub(fresh_server)
    assert info.value.limit_s == 1.5 and f"model.py:{HANG_LINE}" in info.value.stack


def test_a_kernel_interrupt_ends_the_wait_with_the_same_report(fresh_server, kernel_interrupts):
    fresh_server.repository.write_config(CONFIG)
    fresh_server.python_model("hang", hanging(1, "time.sleep(100000)"))
    for protocol in ("http", "grpc"):
        timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(labkit.errors.RequestInterruptedError) as info:
            labkit.infer(fresh_server, "hang", X, protocol=protocol, timeout_s=60)
        timer.join()
        assert 0.9 < info.value.waited_s < 10 and info.value.limit_s == 60
        assert f"model.py:{HANG_LINE}" in info.value.stack and not info.value.restart_needed  # lab.unstick ends it
    assert labkit.check_add_sub(fresh_server).ok


def test_a_cpp_endless_loop_shows_the_cell_line(fresh_server, capfd):
    cfg = labkit.model_config("spinner", "spinny", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    fresh_server.repository.write_config(cfg)
    fresh_server.cpp_backend("spinny", SPINNING, ["spinner"], progress=False)
    t0 = time.monotonic()
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.infer(fresh_server, "spinner", {"IN0": np.zeros(4, np.int32)}, timeout_s=2)
    assert time.monotonic() - t0 < 2 + 4
    assert f"spinny.cc:{SPIN_LINE} in operator():  spins = spins + 1;  // the endless loop" in info.value.stack
    assert info.value.restart_needed  # a thread inside Triton: lab.restart()
    assert labkit.check_add_sub(fresh_server).ok
    with pytest.raises(labkit.InferenceError) as refused:
        fresh_server.unstick("spinner")
    assert refused.value.model == "spinner" and "cannot be ended from outside" in refused.value.reason
    assert f"spinny.cc:{SPIN_LINE}" in refused.value.stack
    capfd.readouterr()
    assert fresh_server.restart() == ["add_sub", "spinner"]  # what the error offers
    assert labkit.check_add_sub(fresh_server).ok
    assert "exited" not in capfd.readouterr().err and fresh_server.health.died is None  # a wanted exit is no crash


def test_os_exit_in_initialize_says_the_exit_code_and_where(fresh_server):
    cfg = labkit.model_config("leaver", "python", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])])
    fresh_server.repository.write_config(cfg)
    with pytest.raises(labkit.ModelLoadError) as info:
        fresh_server.python_model("leaver", EXITING)
    text = info.value.detail  # how the stub ended, and its last lines
    assert info.value.model == "leaver"
    assert "instance leaver_0_0" in text and "exited with exit code 3" in text
    assert "os._exit(3) was called at model.py:8 in initialize" in text
    assert "initialize: leaving now" in text  # its last lines
    assert fresh_server.loaded_models() == ["add_sub"] and labkit.check_add_sub(fresh_server).ok


def test_a_segfault_in_execute_says_the_signal_and_the_line(fresh_server):
    fresh_server.repository.write_config(CONFIG)
    fresh_server.python_model("hang", hanging(1, "import ctypes; ctypes.string_at(0)"))
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(fresh_server, "hang", X, timeout_s=20)
    text = info.value.detail  # how the stub ended, and its last lines
    assert info.value.model == "hang"
    assert "was killed by SIGSEGV (signal 11)" in text
    assert f'model.py", line {HANG_LINE} in execute' in text  # the crash's Python stack, in its last lines
    assert labkit.check_add_sub(fresh_server).ok


FORGETFUL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT0", np.ones(4, np.float32))]))
            # the bug: no sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def test_a_stream_that_never_ends_times_out_and_a_stuck_one_shows_its_line(fresh_server):
    cfg = labkit.model_config("forgetful", "python", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])])
    cfg.model_transaction_policy.decoupled = True
    fresh_server.repository.write_config(cfg)
    fresh_server.python_model("forgetful", FORGETFUL)
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.stream_infer(fresh_server, "forgetful", X, timeout_s=1.5)
    assert info.value.stack == ""  # execute returned: nothing is stuck, the final flag is missing
    assert "sent 1 response(s) so far and no final flag" in info.value.reason

    cfg.name = "hang"
    fresh_server.repository.write_config(cfg)
    fresh_server.python_model("hang", hanging(1, "time.sleep(100000)"))
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.stream_infer(fresh_server, "hang", X, timeout_s=1.5)
    assert f"model.py:{HANG_LINE}" in info.value.stack and "sent 0 response(s)" in info.value.reason
    assert labkit.check_add_sub(fresh_server).ok


def test_a_stub_stuck_below_python_is_left_alone_with_a_clear_error(fresh_server):
    deadlock = (
        "import ctypes; libc = ctypes.CDLL(None); m = ctypes.create_string_buffer(64); "
        "libc.pthread_mutex_init(m, None); libc.pthread_mutex_lock(m); libc.pthread_mutex_lock(m)"
    )
    fresh_server.repository.write_config(CONFIG)
    fresh_server.python_model("hang", hanging(1, deadlock))
    with pytest.raises(labkit.RequestTimeoutError):
        labkit.infer(fresh_server, "hang", X, timeout_s=1)
    with pytest.raises(labkit.InferenceError) as info:
        fresh_server.unstick("hang")
    assert info.value.model == "hang" and "stuck below Python" in info.value.reason
    assert f"model.py:{HANG_LINE}" in info.value.stack and "lab.restart()" in info.value.remedy
    assert fresh_server.alive and labkit.check_add_sub(fresh_server).ok  # nothing was killed


def _stopped_threads(pid: int) -> int:
    """How many of ``pid``'s threads are stopped by a tracer right now (state t or T in /proc)."""
    stopped = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            stopped += stat.read_text().rsplit(")", 1)[1].split()[0] in ("t", "T")
        except OSError:
            continue
    return stopped


def test_reading_a_stuck_stubs_stack_never_pauses_it(fresh_server):
    # Triton 23.12 fails a stub that misses its one-second health window (python_backend r23.12
    # src/stub_launcher.cc:555-596, "Stub process ... is not healthy"): a load failed so in CI while
    # py-spy held the stub stopped to read it.
    fresh_server.repository.write_config(CONFIG)
    fresh_server.python_model("hang", hanging(1, "while True: sum(range(100))"))
    with pytest.raises(labkit.RequestTimeoutError):
        labkit.infer(fresh_server, "hang", X, timeout_s=1)
    (stub,) = stub_processes(fresh_server.runtime, "hang")
    seen, reading = [], threading.Event()
    watcher = threading.Thread(
        target=lambda: [seen.append(_stopped_threads(stub.pid)) for _ in iter(reading.is_set, True)]
    )
    watcher.start()
    try:
        stacks = [python_stack(fresh_server.runtime, "hang") for _ in range(10)]
    finally:
        reading.set()
        watcher.join()
    assert all(f"model.py:{HANG_LINE}" in stack for stack in stacks)  # read every time, while it runs
    assert len(seen) > 100 and max(seen) == 0
    fresh_server.unstick("hang")
    assert labkit.check_add_sub(fresh_server).ok
