"""The log view's tail, and what labkit's errors carry, without a server."""

from __future__ import annotations

import labkit
import labkit.errors
import labkit.server
from labkit.server.logs import LogView


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


def test_errors_carry_fields_and_say_what_to_do():
    load = labkit.ModelLoadError("Triton could not load model 'm': boom. Fix it.", model="m", reason="boom")
    assert (load.model, load.reason) == ("m", "boom")
    build = labkit.BuildError("did not compile", backend="b", compiler_output="b.cc:3: error: x")
    assert build.compiler_output.startswith("b.cc:3") and build.backend == "b"
    request = labkit.RequestError("rejected", model="m", reason="r", expected="X FP32 [4]", sent="X INT32 [4]")
    assert isinstance(request, labkit.InferenceError) and request.model == "m"
    timeout = labkit.RequestTimeoutError("no answer", model="m", limit_s=2.0, stack="model.py:7")
    assert timeout.limit_s == 2.0 and isinstance(timeout, labkit.InferenceError)
    server = labkit.errors.ServerNotRunningError("gone", "last line")
    assert server.log_tail == "last line"  # and its message shows it: test_error_messages.py
    assert issubclass(labkit.errors.InvalidNameError, ValueError) and issubclass(
        labkit.errors.ConfigError, labkit.errors.RepositoryError
    )
