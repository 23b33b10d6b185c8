"""A backend built in the lab, exported as a CMake project, built offline with the PyPI cmake and
ninja, and served from the installed library by a real Triton 23.12."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np

import labkit
import labkit.server
from labkit.course import reference
from labkit.native import build_project, reference_source
from labkit.native.build import dynamic_symbols

EDITED = (
    reference_source("minimal")
    .read_text()
    .replace(
        "// (edit here: change `in` before it is sent back)",
        "for (size_t k = 0; k < in.count<int32_t>(); ++k) in.data<int32_t>()[k] += 7;  // the lab's edit",
    )
)


def test_exported_project_builds_offline_and_serves(tmp_path):
    with labkit.server.EmbeddedServer() as lab:
        lab.start()
        lab.repository.copy_model_from(reference.repository(), "minimal_batching")
        lab.cpp_backend("minimal", EDITED, progress=False)
        project = lab.models.export_backend("minimal", tmp_path / "project")
    cmake = (project / "CMakeLists.txt").read_text()
    assert 'set(TRITON_REPO_TAG "r23.12"' in cmake and "GIT_TAG main" not in cmake
    assert "install(TARGETS triton-minimal-backend LIBRARY DESTINATION backends/minimal)" in cmake
    assert (project / "Dockerfile").read_text().count("FROM nvcr.io/nvidia/tritonserver:23.12-py3") == 1
    assert "the lab's edit" in (project / "src" / "minimal.cc").read_text()
    assert sorted(p.name for p in (project / "models").iterdir()) == ["minimal_batching"]
    assert not list((project / "models").rglob("libtriton_*"))  # the installed backend serves, not a copy

    library = build_project(project, tmp_path / "prefix", progress=False)  # offline: no network here
    assert library == tmp_path / "prefix" / "backends" / "minimal" / "libtriton_minimal.so"
    exported, _ = dynamic_symbols(library)
    assert exported and all(name.startswith("TRITONBACKEND_") for name in exported)

    # A server whose repository is the exported models and whose backend folder holds the installed library.
    with labkit.server.EmbeddedServer(repository=project / "models") as served:
        shutil.copytree(tmp_path / "prefix" / "backends" / "minimal", served.workspace.backend_dir / "minimal")
        served.start()
        served.load("minimal_batching")
        x = reference.sample_inputs("minimal_batching")["IN0"]
        # + 7: the lab's edit, from the only library there is (the model folders hold none)
        np.testing.assert_array_equal(labkit.infer(served, "minimal_batching", {"IN0": x})["OUT0"], x + 7)


def test_a_labs_export_takes_its_own_build_though_another_lab_built_later(tmp_path):
    """The build cache is the machine's: a second lab (another kernel, a test, the room) building the same
    backend afterwards must not change what the first lab exports."""
    other = EDITED.replace("+= 7;  // the lab's edit", "+= 9;  // another lab's edit")
    with labkit.server.EmbeddedServer() as mine, labkit.server.EmbeddedServer() as theirs:
        for lab in (mine, theirs):
            lab.start()
            lab.repository.copy_model_from(reference.repository(), "minimal_batching")
        mine.cpp_backend("minimal", EDITED, progress=False)
        theirs.cpp_backend("minimal", other, progress=False)  # the cache's most recent build now
        project = mine.models.export_backend("minimal", tmp_path / "mine")
        elsewhere = theirs.models.export_backend("minimal", tmp_path / "theirs")
    assert "the lab's edit" in (project / "src" / "minimal.cc").read_text()
    assert "another lab's edit" in (elsewhere / "src" / "minimal.cc").read_text()


def test_cli_exports_the_reference_backend_with_its_models(tmp_path):
    target = tmp_path / "recommended-backend"
    # Export takes the backend's latest build in the cache: an empty cache of its own, so that what other
    # tests (or the official recommended.cc) built before cannot decide what this one exports.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "labkit.cli",
            "export",
            "recommended",
            str(target),
            "--repository",
            str(reference.repository()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "models: recommended_batching" in proc.stdout
    # what to run with NVIDIA's image: the project's Dockerfile builds the backend into it with the models
    assert f"docker build -t tritonserver-recommended {target} && docker run --rm -p 8000:8000" in proc.stdout
    assert (target / "Dockerfile").read_text().count("FROM nvcr.io/nvidia/tritonserver:23.12-py3") == 1
    assert (target / "src" / "recommended.cc").read_text() == reference_source("recommended").read_text()
    assert (target / "models" / "recommended_batching" / "config.pbtxt").exists()
    again = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "export-backend", "minimal", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 3 and "holds something else" in again.stderr
