"""A server that dies is noticed at once, reported with its log, and restarted with its models."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from crash_support import SEGFAULT, crash_site, crash_with, line_of
from waiting_support import eventually

import labkit
import labkit.errors
from labkit.course import reference
from labkit.native import reference_source
from labkit.observe.stats import model_stats


def test_killed_server_is_noticed_and_restarted(fresh_server, capfd):
    reference.serve(fresh_server, ["minimal_batching"])
    old_pid = fresh_server.runtime.triton_pid
    failures: list[BaseException] = []

    def load() -> None:
        try:
            labkit.run_load(
                fresh_server,
                "minimal_batching",
                reference.sample_inputs("minimal_batching"),
                requests=10**6,
                concurrency=2,
                duration_s=30,
            )
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    worker = threading.Thread(target=load)
    worker.start()
    # requests are flowing (so some are in flight when the server dies): an answer has come back
    eventually(lambda: model_stats(fresh_server, "minimal_batching").success_count > 0, "the first answers")
    os.kill(old_pid, signal.SIGKILL)
    killed = time.monotonic()
    eventually(lambda: fresh_server.health.died is not None, "the death to be noticed", timeout_s=5, interval_s=0.01)
    assert time.monotonic() - killed < 2.0
    worker.join(timeout=10)
    assert not worker.is_alive(), "a request in flight hung instead of failing"
    assert (
        isinstance(failures[0], labkit.errors.ServerNotRunningError)
        and failures[0].exit_summary == "killed by signal 9"
    )
    with pytest.raises(labkit.errors.ServerNotRunningError) as info:
        labkit.check_add_sub(fresh_server)
    assert info.value.exit_summary == "killed by signal 9"
    assert "successfully loaded 'minimal_batching'" in info.value.log_tail
    assert "requests to minimal_batching were in flight" in capfd.readouterr().err

    assert fresh_server.restart() == ["add_sub", "minimal_batching"]
    assert fresh_server.runtime.triton_pid != old_pid and fresh_server.health.died is None
    assert labkit.check_add_sub(fresh_server).ok
    assert labkit.check_passthrough(fresh_server, "minimal_batching", concurrent=2).ok


def test_segfaulting_backend_names_the_model_and_the_line(fresh_server, capfd):
    error = crash_with(fresh_server, SEGFAULT)
    assert error.doing == "The request to 'crasher' failed" and error.exit_summary == "killed by signal 11"
    line = line_of(SEGFAULT, "*nowhere = 1;")
    assert crash_site(fresh_server) == ("SIGSEGV", "", "crashy.cc", line)
    assert error.crash == str(fresh_server.crash()) and error.reason == "the Triton server has exited"
    eventually(lambda: fresh_server.health.died is not None, "the death to be noticed", timeout_s=5, interval_s=0.01)
    err = capfd.readouterr().err
    assert "requests to crasher were in flight" in err and f"SIGSEGV at crashy.cc:{line}" in err
    # back with both models; the crashing one would crash again, but add_sub serves
    assert fresh_server.restart() == ["add_sub", "crasher"]
    assert labkit.check_add_sub(fresh_server).ok


INLINED = """
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
static void poke(int value) {
  volatile int* nowhere = nullptr;
  *nowhere = value;  // the crash, inside poke
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch&) {
    poke(1);  // -O2 inlines poke here
  });
}
"""


def test_a_crash_in_an_inlined_function_names_it_and_the_function_it_was_inlined_into(fresh_server):
    error = crash_with(fresh_server, INLINED)
    inner, call = line_of(INLINED, "*nowhere = value;"), line_of(INLINED, "poke(1);")
    assert crash_site(fresh_server) == ("SIGSEGV", "", "crashy.cc", inner)
    crash = fresh_server.crash()
    assert crash is not None and error.crash == str(crash)
    innermost = [(s.function, s.file, s.line, s.inlined) for s in crash.lines[0][1][:2]]
    assert innermost == [("poke", "crashy.cc", inner, True), ("operator()", "crashy.cc", call, True)], crash.lines[0]


ABORTS = """#include <cstdlib>
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  if (count > 0) std::abort();  // an assert that failed, say
  return nullptr;
}
"""

THROWS = """#include <stdexcept>
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)

// Outside labkit::execute nothing catches it: the exception escapes the entry point into Triton.
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  if (count > 0) throw std::out_of_range("row 7 of 4");
  return nullptr;
}
"""


def test_abort_is_shown_at_its_line(fresh_server):
    error = crash_with(fresh_server, ABORTS)
    line = line_of(ABORTS, "std::abort()")
    assert crash_site(fresh_server) == ("SIGABRT", "", "crashy.cc", line)
    crash = fresh_server.crash()
    assert crash is not None and error.crash == str(crash)
    assert crash.where is not None and crash.where.function.startswith("TRITONBACKEND_ModelInstanceExecute")


def test_escaping_exception_is_shown_with_its_type_message_and_line(fresh_server):
    error = crash_with(fresh_server, THROWS)
    line = line_of(THROWS, "throw std::out_of_range")
    assert crash_site(fresh_server) == ("SIGABRT", "std::out_of_range: row 7 of 4", "crashy.cc", line)
    assert error.crash == str(fresh_server.crash())


def test_crash_in_a_magic_cell_is_shown_at_the_editor_line(fresh_server):
    """The %%triton_cpp line is the cell's line 1, so the body's line k is the editor's line k + 1;
    a debug build (-O0 -g) gives the same line."""
    from IPython.core.interactiveshell import InteractiveShell

    cfg = labkit.model_config("crasher", "crashy", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    fresh_server.repository.write_config(cfg)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "labkit")
    shell.run_cell_magic("triton_cpp", "crashy --debug --models crasher", SEGFAULT)
    with pytest.raises(labkit.errors.ServerNotRunningError) as info:
        labkit.infer(fresh_server, "crasher", {"IN0": reference.np.zeros(4, reference.np.int32)})
    editor_line = line_of(SEGFAULT, "*nowhere = 1;") + 1
    assert crash_site(fresh_server) == ("SIGSEGV", "", "crashy.cc", editor_line)
    assert info.value.crash == str(fresh_server.crash())


def test_a_crash_after_restart_and_a_rebuild_is_reported_at_its_line(fresh_server):
    """restart() loads the model's library into a new process; the next build goes to a new path (it
    was copied over the mapped library: the server died at the load, and the crash handler, whose code
    lay in that file, reported nothing)."""
    cfg = labkit.model_config("crasher", "crashy", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    fresh_server.repository.write_config(cfg)
    fresh_server.cpp_backend("crashy", reference_source("minimal"), ["crasher"], progress=False)
    assert fresh_server.restart() == ["add_sub", "crasher"]
    error = crash_with(fresh_server, SEGFAULT)
    assert crash_site(fresh_server) == ("SIGSEGV", "", "crashy.cc", line_of(SEGFAULT, "*nowhere = 1;"))
    assert error.crash == str(fresh_server.crash())
