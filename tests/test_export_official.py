"""`labkit export` of backends written against Triton's own headers (official mode) and of backends made
of several files: Triton's r23.12 recommended example (one file) and bls example (backend.cc, bls.cc,
bls_utils.cc and their headers), unchanged from the pinned archive, exported as CMake projects that
compile Triton's backend utilities from the pinned sources, built offline with the PyPI cmake and ninja,
served by the embedded Triton 2.41 from the installed library, and passing the official clients."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
import labkit.repository
import labkit.server
from labkit.course.reference import add_sub_source
from labkit.native import build_project, export_backend
from labkit.native.build import dynamic_symbols
from labkit.native.export import _tool

LABKIT = [sys.executable, "-m", "labkit.cli"]


def _compiled(project: Path) -> list[str]:
    """The backend's own files the exported CMakeLists.txt compiles."""
    cmake = (project / "CMakeLists.txt").read_text()
    listed = cmake.split("SHARED\n", 1)[1].split(")", 1)[0].split()
    return [name for name in listed if not name.startswith("src/labkit/")]


def _client(client: Path, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(client), "-u", url], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_official_recommended_exported_built_and_served(backend_examples, tmp_path):
    repository = tmp_path / "recommended_models"
    shutil.copytree(backend_examples / "model_repos" / "recommended_models", repository)
    source = backend_examples / "backends" / "recommended" / "src" / "recommended.cc"
    project = export_backend("recommended", tmp_path / "project", source=source, repository=repository)
    assert _compiled(project) == ["src/recommended.cc"]
    assert (project / "src" / "recommended.cc").read_text() == source.read_text()
    cmake = (project / "CMakeLists.txt").read_text()
    assert "set(LABKIT_OFFICIAL_MODE ON)" in cmake and "set(LABKIT_HELPERS OFF)" in cmake
    assert "${TRITON_BACKEND_SOURCE_DIR}/src/backend_model.cc" in cmake  # the utilities are compiled, not assumed
    # Neither labkit's helpers nor its declarations: Triton's own headers are the ones found.
    assert not (project / "include").exists() and not (project / "offline").exists()
    assert sorted(p.name for p in (project / "models").iterdir()) == ["batching"]

    library = build_project(project, tmp_path / "prefix", progress=False)
    exported, undefined = dynamic_symbols(library)
    assert exported and all(name.startswith("TRITONBACKEND_") for name in exported)
    assert not any("triton::backend" in name or "BackendModel" in name for name in undefined)  # linked in
    with labkit.server.EmbeddedServer(
        repository=project / "models", backend_directory=tmp_path / "prefix" / "backends"
    ) as srv:
        srv.start()
        srv.load("batching")
        proc = _client(backend_examples / "clients" / "recommended_client", srv.endpoints.http_url)
        stats = labkit.model_stats(srv, "batching", settle=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sent = re.findall(r"input = (\[.*?\])\n(?! )", proc.stdout, flags=re.DOTALL)
    answered = re.findall(r"OUTPUT = (\[.*?\])\n(?! )", proc.stdout, flags=re.DOTALL)
    assert len(sent) == 2 and answered == sent, proc.stdout
    assert stats.execution_count > 0  # Triton's utilities built with statistics on, as Triton's CMake builds them


@pytest.mark.slow
def test_multi_file_bls_exported_by_the_cli_built_and_served(backend_examples, tmp_path):
    repository = tmp_path / "bls_models"
    shutil.copytree(backend_examples / "model_repos" / "bls_models", repository)
    shutil.rmtree(repository / "addsub_tf")  # a TensorFlow model this Triton cannot serve: a Python stand-in
    repo = labkit.repository.ModelRepository(repository)
    tensors = [(name, "FP32", [16]) for name in ("INPUT0", "INPUT1")]
    outputs = [(name, "FP32", [16]) for name in ("OUTPUT0", "OUTPUT1")]
    repo.write_config(labkit.model_config("addsub_tf", "python", tensors, outputs))
    (repository / "addsub_tf" / "1" / "model.py").write_text(add_sub_source())
    (repository / "bls_fp32" / "1").mkdir(exist_ok=True)
    source = backend_examples / "backends" / "bls" / "src"
    target = tmp_path / "project"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # nothing of earlier builds decides the export
    proc = subprocess.run(
        [*LABKIT, "export", "bls", str(target), "--source", str(source), "--repository", str(repository)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "models: bls_fp32" in proc.stdout
    assert _compiled(target) == ["src/backend.cc", "src/bls.cc", "src/bls_utils.cc"]
    for name in ("backend.cc", "bls.cc", "bls_utils.cc", "bls.h", "bls_utils.h"):
        assert (target / "src" / name).read_text() == (source / name).read_text(), name

    library = build_project(target, tmp_path / "prefix", progress=False)
    with labkit.server.EmbeddedServer(repository=repository, backend_directory=tmp_path / "prefix" / "backends") as srv:
        srv.start()
        for model in ("addsub_python", "addsub_tf", "bls_fp32"):
            srv.load(model)
        proc = _client(backend_examples / "clients" / "bls_client", srv.endpoints.http_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout
    assert not list(repository.rglob("libtriton_*"))  # served from the installed library only
    assert library.name == "libtriton_bls.so"


def test_offline_official_project_without_tritons_sources_says_what_to_pass(backend_examples, tmp_path):
    """Configured offline by hand without the folders of Triton's sources, CMake stops and names the first."""
    source = backend_examples / "backends" / "recommended" / "src" / "recommended.cc"
    project = export_backend("recommended", tmp_path / "project", source=source)
    proc = subprocess.run(
        [
            _tool("cmake"),
            "-S",
            str(project),
            "-B",
            str(project / "build"),
            "-G",
            "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}",
            "-DTRITON_OFFLINE=ON",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "TRITON_CORE_SOURCE_DIR" in proc.stderr, proc.stdout + proc.stderr
