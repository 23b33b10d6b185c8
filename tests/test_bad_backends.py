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
import labkit.server
from labkit.course.reference import add_sub_source

X = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}


def _python_model(server, name: str, source: str) -> None:
    cfg = server.repository.read_config("add_sub")
    cfg.name = name
    server.python_model(name, source, cfg)


def test_exception_in_execute(fresh_server):
    _python_model(
        fresh_server,
        "raises",
        add_sub_source().replace("        responses = []", "        raise RuntimeError('execute blew up at step 3')"),
    )
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(fresh_server, "raises", X)
    assert "execute blew up at step 3" in info.value.reason, info.value
    assert labkit.check_add_sub(fresh_server).ok


def test_wrong_response_count(fresh_server):
    _python_model(fresh_server, "too_few", add_sub_source().replace("        return responses", "        return []"))
    with pytest.raises(labkit.InferenceError):
        labkit.infer(fresh_server, "too_few", X)
    assert labkit.check_add_sub(fresh_server).ok


def test_import_error_names_the_module(fresh_server):
    with pytest.raises(labkit.ModelLoadError) as info:
        _python_model(fresh_server, "imports", "import no_such_module_xyz\n" + add_sub_source())
    assert "no_such_module_xyz" in info.value.reason, info.value
    assert labkit.check_add_sub(fresh_server).ok


def test_exception_in_finalize_does_not_stop_the_server(fresh_server):
    _python_model(
        fresh_server,
        "bad_finalize",
        add_sub_source().replace(
            '        pb_utils.Logger.log_info(f"{self.model_name}: finalized")',
            "        raise RuntimeError('finalize failed')",
        ),
    )
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
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(fresh_server, "checked", {"IN0": good - 5})
    assert "IN0 must not start negative" in info.value.reason, info.value
    stats = labkit.model_stats(fresh_server, "checked", settle=True)
    assert stats.success_count == 1 and stats.fail_count == 1
    assert labkit.check_add_sub(fresh_server).ok


#: What the tests beside this one (pytest-xdist's other worker) may add to the checkout meanwhile: screenshots
#: and logs kept for a person, and hypothesis's examples (both documented outputs, .ci/check-tree.sh).
_OTHER_TESTS_OUTPUTS = ("!! test-artifacts/", "!! .hypothesis/")


def _checkout_state(project: Path) -> list[str]:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=project, capture_output=True, text=True
    ).stdout
    return [line for line in status.splitlines() if line not in _OTHER_TESTS_OUTPUTS]


def test_demo_writes_only_in_its_working_and_temporary_folders(tmp_path):
    project = Path(__file__).resolve().parent.parent
    before = _checkout_state(project)
    home, tmp, work = tmp_path / "home", tmp_path / "tmp", tmp_path / "work"
    for d in (home, tmp, work):
        d.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(home / ".cache")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "labkit.cli",
            "demo",
            "--only",
            "add_sub",
            "--only",
            "minimal",
            "--json",
            str(work / "demo.json"),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((work / "demo.json").read_text())["ok"]
    after = _checkout_state(project)
    assert after == before, "the demo wrote into the project checkout"
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*") if p.is_file()}
    assert written <= {"home", "tmp", "work"}
    assert any((home / ".cache" / "labkit" / "builds").rglob("libtriton_minimal.so"))  # builds went to the cache


# Stands in for a preemption at the worst moment: after Triton's backend thread reports a payload done
# (the promise in Payload::Execute), it keeps the CPU busy for half a second before it goes on to put
# its instance back. Preloaded into tritonserver; acts only while the flag file exists.
PREEMPTED_CC = r"""
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

extern "C" void _ZNSt28__atomic_futex_unsigned_base19_M_futex_notify_allEPj(unsigned* word) {
  using Notify = void (*)(unsigned*);
  static Notify real = reinterpret_cast<Notify>(
      dlvsym(RTLD_NEXT, "_ZNSt28__atomic_futex_unsigned_base19_M_futex_notify_allEPj", "GLIBCXX_3.4.21"));
  real(word);
  const char* flag = getenv("PREEMPTED_FLAG");
  const char* range = getenv("PREEMPTED_RANGE");
  Dl_info info;
  void* caller = __builtin_return_address(0);
  if (!flag || !range || access(flag, F_OK) != 0 || !dladdr(caller, &info) || !strstr(info.dli_fname, "libtritonserver")) return;
  unsigned long offset = (unsigned long)caller - (unsigned long)info.dli_fbase;
  if (offset < strtoul(range, nullptr, 16) || offset >= strtoul(strchr(range, ',') + 1, nullptr, 16)) return;
  close(open(getenv("PREEMPTED_SEEN"), O_CREAT | O_WRONLY, 0644));
  for (double end = now() + 0.5; now() < end;) {
  }
}
"""


def _payload_execute_range() -> str:
    """Where Payload::Execute lies in the server library (from its symbol table), as "start,end" in hex."""
    library = next(labkit.plumbing.triton_dist.locate().lib_dir.glob("libtritonserver*.so*"))
    out = subprocess.run(["nm", "-S", str(library)], capture_output=True, text=True, check=True).stdout
    start, size = next(
        line.split()[:2] for line in out.splitlines() if line.endswith(" _ZN6triton4core7Payload7ExecuteEPb")
    )
    return f"{start},{int(start, 16) + int(size, 16):x}"


def test_unload_right_after_load_while_the_backend_thread_is_busy(tmp_path):
    """Triton 2.41 deletes an unloaded model in a thread of its own, whose StopBackendThread() reads the
    backend thread's deque of instances unlocked. Right after a load that backend thread may not yet have
    put its instance back after the warm-up (preempted there on a busy machine): the deque is empty and
    the server died with SIGSEGV (the intermittent crash of the finalize test above). labkit waits until
    no Triton thread is runnable before it unloads; here the backend thread is kept busy in that window."""
    shim = tmp_path / "preempted.so"
    (tmp_path / "preempted.cc").write_text(PREEMPTED_CC)
    subprocess.run(
        ["g++", "-shared", "-fPIC", "-O1", "-o", str(shim), str(tmp_path / "preempted.cc"), "-ldl"], check=True
    )
    flag, seen = tmp_path / "flag", tmp_path / "seen"
    env = {
        "LD_PRELOAD": str(shim),
        "PREEMPTED_FLAG": str(flag),
        "PREEMPTED_SEEN": str(seen),
        "PREEMPTED_RANGE": _payload_execute_range(),
    }
    with labkit.server.EmbeddedServer(env=env) as server:
        server.start()
        server.repository.write_config(
            labkit.model_config("m", "prompt", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
        )
        server.cpp_backend("prompt", FAILING_CPP, progress=False)
        server.unload("m")
        flag.touch()
        server.load("m")
        server.unload("m")  # the backend thread is still busy after the load's warm-up
        flag.unlink()
        assert seen.exists(), "the backend thread never reached the moment this test is about"
        assert server.alive and server.health.died is None
        server.load("m")
        assert labkit.infer(server, "m", {"IN0": np.arange(4, dtype=np.int32)})["OUT0"].tolist() == [0, 1, 2, 3]
