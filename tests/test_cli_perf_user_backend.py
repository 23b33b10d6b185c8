"""`labkit perf --repository` on a person's repository whose model names one of labkit's reference
backend names (`backend: "minimal"`): the person's own library is measured, from a backend directory,
and labkit neither builds its reference minimal nor writes into the repository; without a library of
the person's, labkit stops before a server starts and says what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
import labkit.errors
import labkit.repository

LABKIT = [sys.executable, "-m", "labkit.cli"]

# The person's own "minimal": it answers like labkit's, and leaves a mark where the test can see that
# its code, not labkit's reference minimal, served the requests.
USER_MINIMAL = r"""
#include <cstdlib>
#include <fstream>

#include "labkit/backend.hpp"

LABKIT_MODEL_STATE(labkit::ModelState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  if (const char* mark = std::getenv("USER_MINIMAL_MARK")) std::ofstream(mark) << "the user's minimal ran";
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    batch.output("OUT0", batch.input("IN0"));
  });
}
"""


def _repository(root: Path) -> Path:
    repo = labkit.repository.ModelRepository(root / "models")
    repo.write_config(labkit.model_config("mine", "minimal", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])]))
    (root / "models" / "mine" / "1").mkdir(exist_ok=True)  # the version folder Triton serves
    return root / "models"


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _perf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*LABKIT, "perf", "mine", "--concurrency", "1", "--measurement-ms", "300", "--stability-percent", "50", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_perf_measures_the_users_own_minimal_from_a_backend_directory(tmp_path):
    backends = tmp_path / "backends"
    source = tmp_path / "minimal.cc"
    source.write_text(USER_MINIMAL)
    built = subprocess.run(
        [*LABKIT, "build-backend", "minimal", str(source), "--out", str(backends)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    repository = _repository(tmp_path)
    before, library = _tree(repository), _tree(backends)
    mark = tmp_path / "mark"
    proc = _perf(
        "--repository", str(repository), "--backend-directory", str(backends), env={"USER_MINIMAL_MARK": str(mark)}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "infer/s" in proc.stdout and "building backend" not in proc.stdout  # labkit built nothing
    assert mark.read_text() == "the user's minimal ran"
    assert _tree(repository) == before and _tree(backends) == library  # nothing written into the person's files


def test_perf_without_the_users_library_says_what_to_do(tmp_path):
    repository = _repository(tmp_path)
    before = _tree(repository)
    proc = _perf("--repository", str(repository))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    message = proc.stderr
    assert message.startswith("labkit: Model 'mine'") and "libtriton_minimal.so" in message
    for option in ("--backend-directory", "--build-reference-backends"):
        assert option in message
    assert "starting Triton" not in proc.stdout and "building backend" not in proc.stdout  # refused first
    assert _tree(repository) == before
    # An empty backend directory is no better: it is named too.
    (tmp_path / "backends").mkdir()
    proc = _perf("--repository", str(repository), "--backend-directory", str(tmp_path / "backends"))
    assert proc.returncode == 3 and str(tmp_path / "backends") in proc.stderr


def test_the_check_is_a_setup_error_naming_the_missing_library(tmp_path):
    from labkit.cli.options import check_own_library

    repository = _repository(tmp_path)
    with pytest.raises(labkit.errors.SetupError) as info:
        check_own_library(repository, "mine", str(tmp_path / "backends"))
    assert info.value.missing == str(tmp_path / "backends" / "minimal" / "libtriton_minimal.so")
    assert info.value.reason == "no backend library"
    (repository / "mine" / "1" / "libtriton_minimal.so").write_bytes(b"\x7fELF")  # one in the version folder will do
    check_own_library(repository, "mine", None)
