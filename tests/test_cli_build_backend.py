"""`labkit build-backend NAME SOURCE... --out DIR`, run as a user would: Triton's r23.12 bls example
(backend.cc, bls.cc, bls_utils.cc and their headers, unchanged) built into DIR/bls/libtriton_bls.so,
served from that backend directory with the official bls_models, and answering the official
bls_client. The examples are read from the pinned backend archive (LABKIT_TRITON_SOURCES, as
tests/conftest.py sets it) at test time."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import labkit
import labkit.repository
import labkit.server
from labkit.course.reference import add_sub_source

LABKIT = [sys.executable, "-m", "labkit.cli"]

# Stands in for the example's addsub_tf (a TensorFlow SavedModel; this Triton has no TensorFlow
# backend): a Python model with the same inputs and outputs.
ADDSUB = add_sub_source()  # labkit's reference add_sub: the same inputs, outputs and arithmetic


def _build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LABKIT, "build-backend", *args], capture_output=True, text=True, timeout=600)


def test_build_backend_writes_only_its_own_library(backend_examples, tmp_path):
    out = tmp_path / "backends"
    (out / "other").mkdir(parents=True)
    (out / "other" / "libtriton_other.so").write_text("someone else's")
    (out / "bls").mkdir()
    (out / "bls" / "NOTES").write_text("mine")
    source = backend_examples / "backends" / "bls" / "src"
    proc = _build(
        "bls", str(source / "backend.cc"), str(source / "bls.cc"), str(source / "bls_utils.cc"), "--out", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"wrote {out / 'bls' / 'libtriton_bls.so'}" in proc.stdout
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "bls",
        "bls/NOTES",
        "bls/libtriton_bls.so",
        "other",
        "other/libtriton_other.so",
    ]
    assert (out / "other" / "libtriton_other.so").read_text() == "someone else's"
    assert (out / "bls" / "NOTES").read_text() == "mine"


def test_build_backend_says_what_is_wrong(tmp_path):
    proc = _build("bls", str(tmp_path / "missing.cc"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 3 and f"{tmp_path / 'missing.cc'}: no such file" in proc.stderr
    assert not (tmp_path / "out").exists()
    assert _build("bls", str(tmp_path)).returncode == 2  # --out is required: a usage error


@pytest.mark.slow
def test_official_bls_from_a_backend_directory_passes_its_client(backend_examples, tmp_path):
    out = tmp_path / "backends"
    proc = _build("bls", str(backend_examples / "backends" / "bls" / "src"), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    repository = tmp_path / "bls_models"
    shutil.copytree(backend_examples / "model_repos" / "bls_models", repository)
    shutil.rmtree(repository / "addsub_tf")
    repo = labkit.repository.ModelRepository(repository)
    tensors = [(name, "FP32", [16]) for name in ("INPUT0", "INPUT1")]
    outputs = [(name, "FP32", [16]) for name in ("OUTPUT0", "OUTPUT1")]
    repo.write_config(labkit.model_config("addsub_tf", "python", tensors, outputs))
    (repository / "addsub_tf" / "1" / "model.py").write_text(ADDSUB)
    (repository / "bls_fp32" / "1").mkdir(exist_ok=True)  # the version folder git keeps no empty folder for
    with labkit.server.EmbeddedServer(repository=repository, backend_directory=out) as srv:
        srv.start()
        for model in ("addsub_python", "addsub_tf", "bls_fp32"):
            srv.load(model)
        client = backend_examples / "clients" / "bls_client"
        proc = subprocess.run(
            [sys.executable, str(client), "-u", srv.endpoints.http_url], capture_output=True, text=True, timeout=120
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout
