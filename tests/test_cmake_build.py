"""A backend's own CMake project built as its repository builds it (labkit.native.cmake_build): Triton's
r23.12 example projects (backend archive, examples/backends/*, unchanged) and labkit's own test projects
(tests/cmake_projects), configured with the PyPI cmake and ninja against the pinned r23.12 sources
(LABKIT_TRITON_SOURCES, as tests/conftest.py sets it; FetchContent disconnected), their options changed
with defines and checked in a real Triton 2.41, their configure and -Werror failures read as fields."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tritonclient import http

import labkit
import labkit.errors
import labkit.server
from labkit.native import build_cmake, cmake_build
from labkit.native.build import dynamic_symbols
from labkit.native.deploy import into_backend_directory
from labkit.observe.stats import family_totals

LABKIT = [sys.executable, "-m", "labkit.cli"]
PROJECTS = Path(__file__).resolve().parent / "cmake_projects"
MAIN_TAGS = {name: "main" for name in cmake_build.TAGS}
NO_MISMATCH_ERROR = "CMAKE_CXX_FLAGS=-Wno-error=mismatched-new-delete"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LABKIT, "build-backend", *args], check=False, capture_output=True, text=True, timeout=600)


def _line_of(path: Path, marker: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if marker in line)


def _counting_answer(build: cmake_build.CMakeBuild, tmp_path: Path) -> tuple[dict | None, dict]:
    """Serve the counting project's model with ``build`` from a backend directory; three requests.
    The last response's parameters, and the model's labkit_counting_requests counter as /metrics has it."""
    out = tmp_path / f"backends-{build.digest[:8]}"
    into_backend_directory(build, out)
    repository = tmp_path / f"models-{build.digest[:8]}"
    shutil.copytree(PROJECTS / "counting" / "models", repository)
    with labkit.server.EmbeddedServer(repository=repository, backend_directory=out) as srv:
        srv.start()
        srv.load("counting")
        client = http.InferenceServerClient(srv.endpoints.http_url)
        sent = http.InferInput("IN", [3], "INT32")
        sent.set_data_from_numpy(np.array([4, 5, 6], dtype=np.int32))
        for _ in range(3):
            result = client.infer("counting", [sent])
        np.testing.assert_array_equal(result.as_numpy("OUT"), [4, 5, 6])
        counted = family_totals(srv.models.metrics_text(), {"labkit_counting_requests": {"model": "counting"}})
    return result.get_response().get("parameters"), counted


@pytest.mark.slow
def test_options_of_our_own_project_change_what_the_library_does_in_triton(tmp_path):
    default = build_cmake("counting", PROJECTS / "counting", progress=False)
    assert default.retagged == MAIN_TAGS and default.defines["TRITON_BACKEND_REPO_TAG"] == "r23.12"
    assert default.defines["TRITON_ENABLE_GPU"] == cmake_build.gpu_default()
    parameters, counted = _counting_answer(default, tmp_path)
    assert parameters is None  # COUNTING_RESPONSE_PARAMETER is off by default
    assert counted == {"labkit_counting_requests": ("counter", 3.0)}  # TRITON_ENABLE_METRICS is on by default

    changed = build_cmake(
        "counting",
        PROJECTS / "counting",
        progress=False,
        defines=["TRITON_ENABLE_METRICS=OFF", "COUNTING_RESPONSE_PARAMETER=ON"],
    )
    assert changed.digest != default.digest
    parameters, counted = _counting_answer(changed, tmp_path)
    assert counted == {}
    # the project's own tag is main; what CMake configured it with, and the library reports, is r23.12
    assert parameters == {"built_at": "r23.12"}


def _echoed(stdout: str) -> bool:
    """Whether recommended_client (which checks nothing itself) got back both inputs it printed."""
    sent = re.findall(r"input = (\[.*?\])\n(?! )", stdout, flags=re.DOTALL)
    return len(sent) == 2 and re.findall(r"OUTPUT = (\[.*?\])\n(?! )", stdout, flags=re.DOTALL) == sent


def _serve_recommended(out: Path, examples: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, int]:
    repository = tmp_path / f"recommended_models-{out.name}"
    shutil.copytree(examples / "model_repos" / "recommended_models", repository)
    with labkit.server.EmbeddedServer(repository=repository, backend_directory=out) as srv:
        srv.start()
        srv.load("batching")
        proc = subprocess.run(
            [sys.executable, str(examples / "clients" / "recommended_client"), "-u", srv.endpoints.http_url],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        executions = labkit.model_stats(srv, "batching", settle=True).execution_count
    return proc, executions


@pytest.mark.slow
def test_official_recommended_from_its_cmake_project_by_the_cli_and_its_stats_option(backend_examples, tmp_path):
    project = backend_examples / "backends" / "recommended"
    built = _cli("recommended", str(project), "--out", str(tmp_path / "default"))
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "default" / "recommended" / "libtriton_recommended.so").is_file()
    assert all(name in built.stderr for name in cmake_build.TAGS) and "'main'" in built.stderr  # the tags it replaced
    proc, executions = _serve_recommended(tmp_path / "default", backend_examples, tmp_path)
    assert proc.returncode == 0 and _echoed(proc.stdout), proc.stdout + proc.stderr
    assert executions > 0  # its CMakeLists turns TRITON_ENABLE_STATS on: the backend reports statistics

    built = _cli("recommended", str(project), "--define", "TRITON_ENABLE_STATS=OFF", "--out", str(tmp_path / "nostats"))
    assert built.returncode == 0, built.stdout + built.stderr
    proc, executions = _serve_recommended(tmp_path / "nostats", backend_examples, tmp_path)
    assert proc.returncode == 0 and _echoed(proc.stdout), proc.stdout + proc.stderr
    assert executions == 0  # same answers, no statistics


@pytest.mark.slow
def test_official_minimal_and_bls_build_unchanged_at_r23_12(backend_examples, tmp_path):
    for example in ("minimal", "bls"):
        build = build_cmake(example, backend_examples / "backends" / example, progress=False)
        assert build.retagged == MAIN_TAGS  # their CMakeLists default to main: built at r23.12 all the same
        exported, _ = dynamic_symbols(build.library)
        assert "TRITONBACKEND_ModelInstanceExecute" in exported
    repository = tmp_path / "minimal_models"
    shutil.copytree(backend_examples / "model_repos" / "minimal_models", repository)
    out = tmp_path / "backends"
    into_backend_directory(build_cmake("minimal", backend_examples / "backends" / "minimal", progress=False), out)
    with labkit.server.EmbeddedServer(repository=repository, backend_directory=out) as srv:
        srv.start()
        for model in ("batching", "nonbatching"):  # minimal checks the backend API version it was built for
            srv.load(model)
        answer = labkit.infer(srv, "nonbatching", {"IN0": np.array([1, 2, 3, 4], dtype=np.int32)})
    np.testing.assert_array_equal(answer["OUT0"], [1, 2, 3, 4])


def test_a_werror_failure_names_the_flag_and_place_and_the_suggested_define_builds_it(tmp_path):
    source = PROJECTS / "strict" / "src" / "strict.cc"
    with pytest.raises(labkit.BuildError) as info:
        build_cmake("strict", PROJECTS / "strict", cache=tmp_path, progress=False)
    failed = info.value
    assert (failed.backend, failed.flag, failed.file) == ("strict", "-Wmismatched-new-delete", "src/strict.cc")
    assert failed.line == _line_of(source, "STRICT: here the unique_ptr frees")  # the project's line, not <memory>'s
    assert "-Werror" in failed.command.split() and str(source) in failed.command  # the compile that failed
    assert "[-Werror=mismatched-new-delete]" in failed.compiler_output
    assert not (tmp_path / ".cmake" / "strict").exists() or not any((tmp_path / ".cmake" / "strict").iterdir())

    build = build_cmake("strict", PROJECTS / "strict", cache=tmp_path, progress=False, defines=[NO_MISMATCH_ERROR])
    assert not build.cached and build.defines[NO_MISMATCH_ERROR.split("=", 1)[0]] == "-Wno-error=mismatched-new-delete"
    assert "TRITONBACKEND_ModelInstanceExecute" in dynamic_symbols(build.library)[0]


def test_the_cli_reports_a_werror_failure_and_writes_nothing(tmp_path):
    proc = _cli("strict", str(PROJECTS / "strict"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 3, proc.stdout + proc.stderr  # a LabkitError, said on stderr
    assert not (tmp_path / "out").exists()


def test_a_failed_configure_names_the_cmake_file_and_line_and_the_command(tmp_path):
    project = PROJECTS / "misconfigured"
    with pytest.raises(labkit.BuildError) as info:
        build_cmake("misconfigured", project, cache=tmp_path, progress=False)
    assert (info.value.file, info.value.line) == (
        "cmake/checks.cmake",
        _line_of(project / "cmake" / "checks.cmake", "FATAL_ERROR"),
    )
    assert info.value.command.split()[1:3] == ["-S", str(project)]
    # past the check, the error is raised inside CMake's FindZLIB: shown at the project's own find_package
    with pytest.raises(labkit.BuildError) as info:
        build_cmake("misconfigured", project, cache=tmp_path, progress=False, defines={"LABKIT_TEST_FLAVOR": "plain"})
    assert (info.value.file, info.value.line) == (
        "CMakeLists.txt",
        _line_of(project / "CMakeLists.txt", "find_package(ZLIB"),
    )
    assert "-DLABKIT_TEST_FLAVOR=plain" in info.value.command.split()
    assert not any((tmp_path / ".cmake" / "misconfigured").iterdir())


def test_builds_are_cached_by_project_content_and_defines(tmp_path, capsys):
    project = tmp_path / "strict"
    shutil.copytree(PROJECTS / "strict", project)
    cold = build_cmake("strict", project, cache=tmp_path / "cache", defines=[NO_MISMATCH_ERROR])
    cached = build_cmake("strict", project, cache=tmp_path / "cache", defines=[NO_MISMATCH_ERROR])
    print(f"strict: cold {cold.seconds:.1f} s, cached {cached.seconds:.1f} s")
    assert not cold.cached and cold.seconds > 0 and cached.cached and cached.library == cold.library
    assert capsys.readouterr().out.count("building backend 'strict' with CMake (strict) ... done\n") == 2
    (project / "build").mkdir()  # a person's own build folder in the project is no part of its content
    (project / "build" / "CMakeCache.txt").write_text("# theirs\n")
    assert build_cmake("strict", project, cache=tmp_path / "cache", defines=[NO_MISMATCH_ERROR], progress=False).cached
    (project / "src" / "strict.cc").write_text((project / "src" / "strict.cc").read_text() + "// an edit\n")
    edited = build_cmake("strict", project, cache=tmp_path / "cache", defines=[NO_MISMATCH_ERROR], progress=False)
    assert not edited.cached and edited.digest != cold.digest
    debug = build_cmake("strict", project, cache=tmp_path / "cache", debug=True, progress=False)  # -O0: no warning
    assert not debug.cached and debug.digest != edited.digest


def test_a_library_of_another_name_and_forced_tags_are_refused(tmp_path):
    with pytest.raises(labkit.BuildError) as info:
        build_cmake("strictly", PROJECTS / "strict", cache=tmp_path, progress=False, defines=[NO_MISMATCH_ERROR])
    assert (info.value.backend, info.value.file) == ("strictly", "CMakeLists.txt")
    with pytest.raises(labkit.errors.ConfigError) as refused:
        build_cmake(
            "strict", PROJECTS / "strict", cache=tmp_path, progress=False, defines=["TRITON_CORE_REPO_TAG=main"]
        )
    assert (refused.value.field, refused.value.value, refused.value.valid) == (
        "define",
        "TRITON_CORE_REPO_TAG=main",
        ["r23.12"],
    )
    with pytest.raises(labkit.errors.ConfigError) as refused:
        build_cmake("strict", PROJECTS / "strict", cache=tmp_path, progress=False, defines=["no equals sign"])
    assert (refused.value.field, refused.value.value) == ("define", "no equals sign")
    with pytest.raises(labkit.errors.SetupError) as missing:
        build_cmake("strict", PROJECTS / "strict" / "src", cache=tmp_path, progress=False)
    assert missing.value.missing == str(PROJECTS / "strict" / "src" / "CMakeLists.txt")


def test_the_cli_builds_a_cmake_project_alone(tmp_path):
    proc = _cli(
        "strict", str(PROJECTS / "strict"), str(PROJECTS / "strict" / "src" / "strict.cc"), "--out", str(tmp_path)
    )
    assert proc.returncode == 3 and not any(tmp_path.iterdir())
    proc = _cli("strict", str(PROJECTS / "strict"), "--headers", "official", "--out", str(tmp_path))
    assert proc.returncode == 3 and not any(tmp_path.iterdir())


def test_gpu_support_follows_the_machine_and_a_define_overrides_it(backend_examples, tmp_path):
    from labkit import gpu

    if not gpu.visible():
        assert cmake_build.gpu_default() == "OFF"
    if cmake_build.gpu_default() == "ON":
        return  # a GPU and a CUDA 12 toolkit: the other tests build with GPU support already
    # here there is no usable CUDA 12 toolkit: asked for anyway, backend r23.12's CUDA part cannot build
    with pytest.raises(labkit.BuildError) as info:
        build_cmake(
            "recommended",
            backend_examples / "backends" / "recommended",
            cache=tmp_path,
            progress=False,
            defines=["TRITON_ENABLE_GPU=ON"],
        )
    said = info.value.compiler_output.upper()  # CMake finds no CUDA toolkit, or CUDA 13's nvcc refuses r23.12's kernel
    assert info.value.backend == "recommended" and ("CUDATOOLKIT" in said or "NVCC FATAL" in said)
