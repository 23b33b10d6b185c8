"""Python backends written from a notebook and reloaded into a running Triton."""

from __future__ import annotations

import numpy as np
import pytest
from waiting_support import eventually

import labkit
import labkit.errors
from labkit.client.inference import infer_together
from labkit.course.reference import add_sub_source

ADD_SUB_SOURCE = add_sub_source()


def test_edit_then_reload_serves_new_code(fresh_server):
    pid = fresh_server.runtime.triton_pid
    for offset in (10, 20, 30):  # three edits within a second or two: each must really reload
        fresh_server.python_model("add_sub", ADD_SUB_SOURCE.replace("a + b", f"a + b + {offset}"))
        result = labkit.check_add_sub(fresh_server, check=False)
        np.testing.assert_allclose(result.output0, result.input0 + result.input1 + offset)
    assert fresh_server.runtime.triton_pid == pid  # same server process throughout
    with pytest.raises(labkit.errors.AnswerMismatchError) as info:
        labkit.check_add_sub(fresh_server)
    assert info.value.model == "add_sub"


def test_syntax_error_shows_reason_and_server_keeps_serving(fresh_server):
    broken = ADD_SUB_SOURCE.replace("def execute(self, requests):", "def execute(self, requests)")
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "def execute(self, requests)" in text)
    with pytest.raises(labkit.ModelLoadError) as info:
        fresh_server.python_model("add_sub", broken)
    reason = info.value.reason  # Triton's words
    assert info.value.model == "add_sub" and "SyntaxError" in reason and f"model.py, line {line}" in reason
    assert info.value.serving == ["add_sub"]
    assert labkit.check_add_sub(fresh_server).ok  # the previous version keeps answering


def test_exception_in_initialize_is_shown(fresh_server):
    cfg = fresh_server.repository.read_config("add_sub")
    cfg.name = "explodes"
    source = ADD_SUB_SOURCE.replace(
        'self.model_name = args["model_name"]', 'raise ValueError("no weights at /models/w.bin")'
    )
    with pytest.raises(labkit.ModelLoadError) as info:
        fresh_server.python_model("explodes", source, cfg)
    assert info.value.model == "explodes" and "no weights at /models/w.bin" in info.value.reason
    assert "explodes" not in fresh_server.loaded_models()
    assert labkit.check_add_sub(fresh_server).ok


def test_model_from_a_class(fresh_server):
    cfg = labkit.model_config("triple", "python", [("X", "FP32", [3])], [("Y", "FP32", [3])])
    fresh_server.python_model("triple", Triple, cfg)
    out = labkit.infer(fresh_server, "triple", {"X": np.array([1, 2, 3], np.float32)})
    np.testing.assert_allclose(out["Y"], [3, 6, 9])


class Triple:
    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", 3 * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
            for r in requests
        ]


SHARED_BACKEND = """
import triton_python_backend_utils as pb_utils
import json

class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.scale = float(params["scale"]["string_value"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", SIGN * self.scale * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
"""


def test_python_based_backend_serves_several_models(fresh_server):
    fresh_server.python_backend("scaler", "SIGN = 1\n" + SHARED_BACKEND)
    for name, scale in (("times2", 2), ("times5", 5)):
        cfg = labkit.model_config(
            name, "scaler", [("X", "FP32", [2])], [("Y", "FP32", [2])], parameters={"scale": scale}
        )
        fresh_server.repository.write_config(cfg)
        fresh_server.load(name)
    x = np.array([1, -1], np.float32)
    assert labkit.infer(fresh_server, "times2", {"X": x})["Y"].tolist() == [2, -2]
    assert labkit.infer(fresh_server, "times5", {"X": x})["Y"].tolist() == [5, -5]
    # edit the shared backend: the magic reloads every loaded model that uses it
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "labkit")
    result = shell.run_cell_magic("triton_python", "--backend scaler", "SIGN = -1\n" + SHARED_BACKEND)
    assert result is None
    assert labkit.infer(fresh_server, "times2", {"X": x})["Y"].tolist() == [-2, 2]
    assert labkit.infer(fresh_server, "times5", {"X": x})["Y"].tolist() == [-5, 5]
    # the same from Python: every loaded model using the backend is reloaded, and named
    assert fresh_server.python_backend("scaler", "SIGN = 1\n" + SHARED_BACKEND) == ["times2", "times5"]
    assert labkit.infer(fresh_server, "times2", {"X": x})["Y"].tolist() == [2, -2]


def test_cell_magic_writes_and_reloads(fresh_server):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "labkit")
    shell.run_cell_magic("triton_python", "add_sub", ADD_SUB_SOURCE.replace("a - b", "a - b - 7"))
    result = labkit.check_add_sub(fresh_server, check=False)
    np.testing.assert_allclose(result.output1, result.input0 - result.input1 - 7)
    with pytest.raises(labkit.errors.MissingConfigError) as info:
        shell.run_cell_magic("triton_python", "nothing_here", ADD_SUB_SOURCE)
    assert info.value.lacks == ["config.pbtxt"] and info.value.model == "nothing_here"
    assert info.value.source == str(fresh_server.repository.model_dir("nothing_here") / "config.pbtxt")
    with pytest.raises(labkit.ModelLoadError) as info:
        shell.run_cell_magic("triton_python", "add_sub", "class TritonPythonModel:\n    def execute(self, r)\n")
    assert "SyntaxError" in info.value.reason


RAISES_IN = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.fail_at_start = args["model_name"] == "fails_at_start"
        if self.fail_at_start:
            raise ValueError("no weights")

    def execute(self, requests):
        raise ValueError("boom")
"""


def _cell_line(cell: str, text: str) -> int:
    """The line of ``text`` as the notebook's editor numbers a magic cell: the magic line is line 1."""
    return 1 + next(i for i, line in enumerate(cell.splitlines(), 1) if text in line)


def test_a_magic_cells_traceback_names_the_cells_own_line(fresh_server):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "labkit")
    for name in ("fails_in_execute", "fails_at_start"):
        fresh_server.repository.write_config(
            labkit.model_config(name, "python", [("X", "FP32", [2])], [("Y", "FP32", [2])])
        )
    shell.run_cell_magic("triton_python", "fails_in_execute", RAISES_IN)
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(fresh_server, "fails_in_execute", {"X": np.zeros(2, np.float32)})
    line = _cell_line(RAISES_IN, 'raise ValueError("boom")')
    assert f"model.py({line}): execute" in info.value.reason  # the traceback, in Triton's words
    model_py = (fresh_server.repository.model_dir("fails_in_execute") / "1" / "model.py").read_text().splitlines()
    assert model_py[line - 1].strip() == 'raise ValueError("boom")'
    with pytest.raises(labkit.ModelLoadError) as info:
        shell.run_cell_magic("triton_python", "fails_at_start", RAISES_IN)
    assert f"model.py({_cell_line(RAISES_IN, 'no weights')}): initialize" in info.value.reason


def test_a_refused_edit_puts_the_serving_model_py_back(fresh_server):
    """After a model.py Triton refuses, the previous one keeps serving and is back on disk, so a
    restart (or a plain load) serves it again instead of failing on the refused one."""
    path = fresh_server.repository.model_dir("add_sub") / "1" / "model.py"
    serving = path.read_text()
    raising = ADD_SUB_SOURCE.replace('self.model_name = args["model_name"]', 'raise ValueError("not today")')
    for broken in (raising, ADD_SUB_SOURCE.replace("def execute(self, requests):", "def execute(self, requests)")):
        with pytest.raises(labkit.ModelLoadError):
            fresh_server.python_model("add_sub", broken)
        assert path.read_text() == serving
    assert fresh_server.restart() == ["add_sub"]
    assert labkit.check_add_sub(fresh_server).ok


ONE_ERROR_FOR_ALL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        {errors}
        return [pb_utils.InferenceResponse(error={error}) for request in requests]
"""


@pytest.mark.parametrize("shared", [False, True], ids=["an error each", "one error object for two"])
def test_one_triton_error_object_answering_two_requests_crashes_triton_23_12(fresh_server, shared):
    # Lesson 01 tells participants to give each bad request a TritonError of its own: this is why.
    source = ONE_ERROR_FOR_ALL.format(
        errors='shared = pb_utils.TritonError("bad", pb_utils.TritonError.INVALID_ARG)' if shared else "pass",
        error="shared" if shared else 'pb_utils.TritonError("bad", pb_utils.TritonError.INVALID_ARG)',
    )
    cfg = labkit.model_config(
        "errors",
        "python",
        [("X", "FP32", [4])],
        [("Y", "FP32", [4])],
        max_batch_size=2,
        dynamic_batching={"max_queue_delay_microseconds": 5_000_000},  # two requests fill the batch: one execute
    )
    fresh_server.python_model("errors", source, cfg)
    inputs = [{"X": np.ones((1, 4), np.float32)}, {"X": np.zeros((1, 4), np.float32)}]
    if shared:
        with pytest.raises(labkit.errors.LabkitError):
            infer_together(fresh_server, "errors", inputs, protocol="grpc", timeout_s=20)
        eventually(lambda: not fresh_server.alive, "Triton to die of the shared error object", timeout_s=20)
        assert "signal 11" in fresh_server.runtime.exit_summary()  # SIGSEGV
        return
    with pytest.raises(labkit.InferenceError):
        infer_together(fresh_server, "errors", inputs, protocol="grpc", timeout_s=20)
    stats = labkit.model_stats(fresh_server, "errors", settle=True)
    assert fresh_server.alive and (stats.fail_count, stats.execution_count) == (2, 1)
