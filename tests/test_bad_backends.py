"""Backends that fail at run time: each failure is a clear labkit error, and the server keeps serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import labkit
from labkit.reference import add_sub_source

X = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}


def _python_model(server, name: str, source: str) -> None:
    cfg = server.repository.read_config("add_sub")
    cfg.name = name
    server.python_model(name, source, cfg)


def test_exception_in_execute(fresh_server):
    _python_model(fresh_server, "raises", add_sub_source().replace(
        "        responses = []", "        raise RuntimeError('execute blew up at step 3')"))
    with pytest.raises(labkit.InferenceError, match="execute blew up at step 3"):
        labkit.infer(fresh_server, "raises", X)
    assert labkit.check_add_sub(fresh_server).ok


def test_wrong_response_count(fresh_server):
    _python_model(fresh_server, "too_few", add_sub_source().replace("        return responses", "        return []"))
    with pytest.raises(labkit.InferenceError):
        labkit.infer(fresh_server, "too_few", X)
    assert labkit.check_add_sub(fresh_server).ok


def test_import_error_names_the_module(fresh_server):
    with pytest.raises(labkit.ModelLoadError, match="no_such_module_xyz"):
        _python_model(fresh_server, "imports", "import no_such_module_xyz\n" + add_sub_source())
    assert labkit.check_add_sub(fresh_server).ok


def test_exception_in_finalize_does_not_stop_the_server(fresh_server):
    _python_model(fresh_server, "bad_finalize", add_sub_source().replace(
        '        pb_utils.Logger.log_info(f"{self.model_name}: finalized")', "        raise RuntimeError('finalize failed')"))
    fresh_server.unload("bad_finalize")
    assert fresh_server.alive and labkit.check_add_sub(fresh_server).ok


FAILING_CPP = """
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor in = batch.input("IN0");
    if (in.data<int32_t>()[0] < 0) throw labkit::Error("IN0 must not start negative", TRITONSERVER_ERROR_INVALID_ARG);
    batch.output("OUT0", in);
  });
}
"""


def test_cpp_execute_errors_become_request_errors(fresh_server):
    cfg = labkit.model_config("checked", "checker", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    fresh_server.repository.write_config(cfg)
    fresh_server.cpp_backend("checker", FAILING_CPP, ["checked"], progress=False)
    good = np.arange(4, dtype=np.int32)
    assert labkit.infer(fresh_server, "checked", {"IN0": good})["OUT0"].tolist() == [0, 1, 2, 3]
    with pytest.raises(labkit.InferenceError, match="IN0 must not start negative"):
        labkit.infer(fresh_server, "checked", {"IN0": good - 5})
    stats = labkit.model_stats(fresh_server, "checked", settle=True)
    assert stats.success_count == 1 and stats.fail_count == 1
    assert labkit.check_add_sub(fresh_server).ok


def test_demo_writes_only_in_its_working_and_temporary_folders(tmp_path):
    project = Path(__file__).resolve().parent.parent
    before = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=project, capture_output=True, text=True).stdout
    home, tmp, work = tmp_path / "home", tmp_path / "tmp", tmp_path / "work"
    for d in (home, tmp, work):
        d.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(home / ".cache")}
    proc = subprocess.run([sys.executable, "-m", "labkit.cli", "demo", "--only", "add_sub", "--only", "minimal",
                           "--json", str(work / "demo.json")], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((work / "demo.json").read_text())["ok"]
    after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=project, capture_output=True, text=True).stdout
    assert after == before, "the demo wrote into the project checkout"
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*") if p.is_file()}
    assert written <= {"home", "tmp", "work"}
    assert any((home / ".cache" / "labkit" / "builds").rglob("libtriton_minimal.so"))  # builds went to the cache
