"""The one message test of each error class: what its message says, above all what to do next. Every
other test asserts an error's type and fields (labkit.errors), never its text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

import labkit
import labkit.errors
import labkit.repository
from labkit.client import inference
from labkit.docker import engine as lk_engine
from labkit.native import build
from labkit.repository import config as cfgmod, names
from labkit.repository.python_source import model_source
from labkit.room import RoomSettings
from labkit.room.k8s import values as k8s
from labkit.stuck import report


class _NoConfigs:
    """A server stand-in for the timeout report: no config to read, nothing running."""

    alive = False

    class repository:  # noqa: N801
        @staticmethod
        def read_config(model):
            raise labkit.errors.ConfigError(problem="none")


def _raised(call):
    with pytest.raises(labkit.LabkitError) as info:
        call()
    return info.value


def _no_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    return _raised(lk_engine.connect)


def _missing_entry_point(monkeypatch):
    monkeypatch.setattr(build, "dynamic_symbols", lambda library, toolchain=None: (set(), set()))
    return _raised(lambda: build._check_symbols("b", Path("libtriton_b.so"), None, (build.REQUIRED_ENTRY_POINT,)))


def _short_input():
    tensor = httpclient.InferInput("X", [4], "FP32")
    tensor.set_data_from_numpy(np.zeros(4, np.float32))
    tensor._raw_data = tensor._raw_data[:8]
    return _raised(lambda: inference.check_sizes("m", [tensor]))


CASES = {
    "ConfigError": (
        lambda mp, tmp: _raised(lambda: cfgmod.parse("max_batch_sise: 4\n")),
        ["max_batch_sise", "Fix that line"],
    ),
    "MissingConfigError": (
        lambda mp, tmp: _raised(lambda: labkit.repository.ModelRepository(tmp).read_config("m")),
        ["Model 'm' has no config.pbtxt at", "config.pbtxt; write one first", "lab.repository.write_config("],
    ),
    "RepositoryNotFoundError": (
        lambda mp, tmp: labkit.errors.RepositoryNotFoundError(path="/r"),
        ["No model repository at /r", "give a folder holding <model>/config.pbtxt"],
    ),
    "RoomFileError": (
        lambda mp, tmp: labkit.errors.RoomFileError(path="/g.csv", problem="unwritable", detail="Read-only"),
        ["Cannot write /g.csv (Read-only)", "give another --csv path"],
    ),
    "LabKernelError": (
        lambda mp, tmp: labkit.errors.LabKernelError(user="p01", code="1/0", problem="failed", errors=["E: v"]),
        ["`1/0` failed in p01's lab: E: v", "Run it in that lab"],
    ),
    "NotebookNotFoundError": (
        lambda mp, tmp: labkit.errors.NotebookNotFoundError(folder="nb", name="07", known=["01_a"]),
        ["No notebook matches '07' in nb", "give a path or one of: 01_a"],
    ),
    "LessonOutcomeError": (
        lambda mp, tmp: labkit.errors.LessonOutcomeError(model="m", happened="loaded", expected="e", check="look"),
        ["m loaded, although e; look."],
    ),
    "AlreadyRanError": (
        lambda mp, tmp: labkit.errors.AlreadyRanError(what="dashboard", remedy="make a new one"),
        ["This dashboard has already run; make a new one."],
    ),
    "InvalidNameError": (lambda mp, tmp: _raised(lambda: names.check_name("")), ["has an empty name", "give a name"]),
    "RepositoryError": (
        lambda mp, tmp: _raised(lambda: model_source("def execute(requests): pass\n")),
        ["no class TritonPythonModel", "looks for it by that name"],
    ),
    "SetupError": (
        lambda mp, tmp: _no_engine(mp, tmp),
        ["Docker engine: unreachable (nothing answers at unix://", "dockerd", "docker-engine.sh"],
    ),
    "BuildError": (
        lambda mp, tmp: _missing_entry_point(mp),
        [
            "does not export TRITONBACKEND_ModelInstanceExecute; it is the one entry point Triton requires",
            "it was not loaded",
            "Define it in your source",
        ],
    ),
    "InputSizeError": (lambda mp, tmp: _short_input(), ["needs 16 bytes", "carries 8 bytes", "nothing was sent"]),
    "ModelNotFoundError": (
        lambda mp, tmp: labkit.errors.ModelNotFoundError(model="nosuch", loaded=["add_sub"]),
        ["'nosuch' is not loaded", "add_sub", "server.load('nosuch')"],
    ),
    "RequestTimeoutError": (
        lambda mp, tmp: report.timeout_error(_NoConfigs(), "hang", 2, stack="model.py:7 in execute"),
        ["'hang'", "2 s", "model.py:7 in execute", "lab.unstick('hang')", "timeout_s="],
    ),
    "ServerNotRunningError": (
        lambda mp, tmp: labkit.errors.ServerNotRunningError(reason="gone", log_tail="last line", remedy="restart"),
        ["Gone; restart.", "--- last server log lines ---\nlast line"],
    ),
    "PerfAnalyzerError": (
        lambda mp, tmp: labkit.errors.PerfAnalyzerError(
            model="m", problem="failed", exit_code=1, output="its words", remedy="read what it said"
        ),
        ["perf_analyzer on 'm' failed (exit status 1); read what it said.", "--- perf_analyzer said ---\nits words"],
    ),
    "PortTakenError": (
        lambda mp, tmp: labkit.errors.PortTakenError(port=8001, service="grpc"),
        ["Port 8001 (grpc) on 127.0.0.1 is taken", "--grpc-port", "--any-ports"],
    ),
    "BackendClashError": (
        lambda mp, tmp: labkit.errors.BackendClashError(backend="python", directory="/b"),
        ["/b/python", "labkit's own Python backend", "Serve a folder without python/"],
    ),
    "RoomSettingsError": (
        lambda mp, tmp: _raised(lambda: k8s.check(RoomSettings(memory="2Gi"))),
        ["memory='2Gi'", "K, M, G, T", "'Gi' and 'GB' are refused"],
    ),
    "UnknownExerciseError": (
        lambda mp, tmp: labkit.errors.UnknownExerciseError(exercise="x", notebook="n.ipynb", known=["a"]),
        ["'exercise:x'", "nothing was changed", "Fix the cell's tag", "a"],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_message_says_what_happened_and_what_to_do(name, monkeypatch, tmp_path):
    make, phrases = CASES[name]
    error = make(monkeypatch, tmp_path)
    assert type(error).__name__ == name, repr(error)
    for phrase in phrases:
        assert phrase in str(error), (phrase, str(error))


def test_a_werror_failure_says_which_flag_and_how_to_pass_an_override():
    from labkit.native.cmake_build import compile_remedy
    from labkit.native.diagnostics import Place

    place = Place("src/strict.cc", 26, "-Wmismatched-new-delete", "g++ -Werror -c src/strict.cc")
    error = labkit.errors.BuildError(
        backend="strict",
        problem="did not compile (project strict)",
        remedy=compile_remedy(place),
        compiler_output="src/strict.cc:26: error: ... [-Werror=mismatched-new-delete]",
        file=place.file,
        line=place.line,
        command=place.command,
        flag=place.flag,
    )
    assert "--define CMAKE_CXX_FLAGS=-Wno-error=mismatched-new-delete" in error.remedy
    message = str(error)
    for phrase in [
        "'strict' did not compile (project strict) at src/strict.cc:26",
        "its own -Werror made the warning -Wmismatched-new-delete",
        "leaves the project's flags as they are",
        "--define CMAKE_CXX_FLAGS=-Wno-error=mismatched-new-delete",
        "g++ -Werror -c src/strict.cc",
        "[-Werror=mismatched-new-delete]",
    ]:
        assert phrase in message, (phrase, message)
