"""The log view's tail, and what labkit's errors carry, without a server."""

from __future__ import annotations

import labkit
import labkit.errors
import labkit.server
from labkit.server.logs import LogFollower, LogView


def test_tail_hides_cpu_noise_and_cuts_triton_usage(tmp_path):
    log = tmp_path / "t.log"
    log.write_text(
        "W1123 Failed to initialize NVML\n"
        "I1123 started\n"
        'E1123 Bad option: "--model-control-mode"\n'
        "Usage: tritonserver [options]\n" + "  --option\n" * 380
    )
    view = LogView(log)
    assert view.tail(5) == 'I1123 started\nE1123 Bad option: "--model-control-mode"'
    assert "NVML" in view.tail(5, hide_cpu_noise=False)
    assert view.grep("started") == ["I1123 started"]


def test_mark_and_since_cut_out_one_step(tmp_path):
    log = tmp_path / "t.log"
    view = LogView(log)
    assert view.mark() == 0 and view.text() == "" and view.since(0) == ""  # no file yet
    log.write_text("before\n")
    mark = view.mark()
    with open(log, "a") as handle:
        handle.write("during\n")
    assert view.since(mark) == "during\n"


# Triton 23.12 wrote this (a Python model's pb_utils.Logger.log_error line, from libtritonserver's logger,
# between an HTTP line of tritonserver's own logger and that line's newline), under load in this project's CI.
GLUED = (
    "W1128 02:12:29.074457 17885 model.py:12] logger_levels: log_warn 50\n"
    "I1128 02:12:29.074524 17885 http_server.cc:1199] HTTP using buffer for: 'TAG', size: 4, addr: 0x7fa248005fc0"
    "E1128 02:12:29.074508 17885 model.py:13] logger_levels: log_error 50\n"
    "\n"
    "I1128 02:12:29.074563 17885 model.py:14] logger_levels: log_verbose 50\n"
)


def test_a_line_that_landed_inside_another_is_read_on_a_line_of_its_own(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("before\n")
    view = LogView(log)
    mark = view.mark()
    shown: list[str] = []
    follower = LogFollower(view, shown.append)  # `labkit serve`'s terminal: from here on
    with log.open("a") as f:
        f.write(GLUED)
    lines = view.since(mark).splitlines()
    assert "E1128 02:12:29.074508 17885 model.py:13] logger_levels: log_error 50" in lines
    assert lines[1].endswith("addr: 0x7fa248005fc0") and view.text().splitlines()[0] == "before"
    assert view.grep("log_error 50") == ["E1128 02:12:29.074508 17885 model.py:13] logger_levels: log_error 50"]
    follower.pump(final=True)
    assert shown[2].startswith("E1128") and len(shown) == 4


def test_errors_carry_fields_and_say_what_to_do():
    load = labkit.ModelLoadError(model="m", reason="boom", remedy="Fix it")
    assert (load.model, load.reason, load.remedy) == ("m", "boom", "Fix it")
    build = labkit.BuildError(backend="b", problem="did not compile", compiler_output="b.cc:3: error: x")
    assert build.compiler_output.startswith("b.cc:3") and build.backend == "b"
    request = labkit.RequestError(model="m", reason="r", expected="X FP32 [4]", sent="X INT32 [4]")
    assert isinstance(request, labkit.InferenceError) and request.model == "m"
    timeout = labkit.RequestTimeoutError(model="m", limit_s=2.0, stack="model.py:7")
    assert timeout.limit_s == 2.0 and isinstance(timeout, labkit.InferenceError)
    server = labkit.errors.ServerNotRunningError(reason="gone", log_tail="last line")
    assert server.log_tail == "last line"  # and its message shows it: test_error_messages.py
    assert issubclass(labkit.errors.InvalidNameError, ValueError) and issubclass(
        labkit.errors.ConfigError, labkit.errors.RepositoryError
    )
