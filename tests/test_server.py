"""The embedded launcher: start, readiness, logs, stop, and nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from waiting_support import within

import labkit
import labkit.errors
import labkit.server


def _ended(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0); its state tells
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _gone(pid: int, timeout_s: float = 15.0) -> bool:
    return within(lambda: _ended(pid), timeout_s, f"process {pid} to end", interval_s=0.1)


def _group_members(pgid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
    return [
        int(p) for p, g, s in (line.split() for line in out.splitlines()) if int(g) == pgid and not s.startswith("Z")
    ]


def test_start_ready_and_stop():
    server = labkit.server.EmbeddedServer()
    assert not server.alive and not server.ready()
    with server.start():
        assert server.alive and server.ready()
        assert server.version == "2.41.0"
        assert server.endpoints.http_port and server.endpoints.grpc_port and server.endpoints.metrics_port
        assert len({server.endpoints.http_port, server.endpoints.grpc_port, server.endpoints.metrics_port}) == 3
        assert labkit.current() is server
        assert "nv_cpu_utilization" in server.models.metrics_text()
        pid = server.runtime.triton_pid
    assert not server.alive
    assert _gone(pid)
    assert not server.workspace.workdir.exists()  # its own temporary folder is cleaned up
    try:  # another test's server may still run: then current() is that one
        assert labkit.current() is not server
    except labkit.errors.ServerNotRunningError:
        pass
    with pytest.raises(labkit.errors.ServerNotRunningError) as info:
        server.models.index()
    assert info.value.stopped


def test_binds_loopback_only(server):
    log = server.logs.text()
    for service in ("GRPCInferenceService", "HTTPService", "Metrics Service"):
        line = next(line for line in log.splitlines() if f"Started {service}" in line)
        assert "at 127.0.0.1:" in line, line


def test_server_logs_are_captured(server):
    assert server.logs.path.exists()
    assert "add_sub" in server.logs.tail(200)
    assert "Failed to initialize NVML" not in server.logs.tail(500)  # CPU-only noise hidden from the tail
    assert "<pre" in server.logs._repr_html_()


def test_failed_start_carries_log_lines(tmp_path):
    server = labkit.server.EmbeddedServer(workdir=tmp_path, extra_args=["--model-control-mode=nonsense"])
    with pytest.raises(labkit.errors.ServerStartError) as info:
        server.start(timeout_s=30)
    assert 'Bad option: "--model-control-mode"' in info.value.log_tail
    assert not server.alive


def test_stop_ends_the_whole_process_group(fresh_server):
    pgid = fresh_server.runtime.triton_pid
    assert len(_group_members(pgid)) >= 2  # tritonserver and the add_sub stub
    fresh_server.stop()
    assert _group_members(pgid) == []
    fresh_server.stop()  # twice is fine


_OWNER = textwrap.dedent(
    """
    import sys, time, labkit
    lab = labkit.start()
    lab.repository.copy_model_from(labkit.reference_repository(), "add_sub")
    lab.load("add_sub")
    print(lab.runtime.triton_pid, flush=True)
    if sys.argv[1] == "sleep":
        time.sleep(120)
    # else: exit without stop(); atexit must clean up
    """
)


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_no_orphan_after_owner_ends(how):
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, "sleep" if how == "sigkill" else "exit"],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(owner.stdout.readline())
    workdir = next(
        p for p in Path(tempfile.gettempdir()).glob("labkit-*/owner.pid") if p.read_text() == str(owner.pid)
    ).parent
    members = _group_members(pid)
    assert pid in members and len(members) >= 2
    if how == "sigkill":
        owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=60)
    assert _gone(pid), "tritonserver outlived its owner"
    within(lambda: not _group_members(pid), 15, "the Python stubs to end", interval_s=0.2)
    assert _group_members(pid) == [], "a Python stub outlived its server"
    if how == "sigkill":
        labkit.server.EmbeddedServer()  # a killed owner cannot clean up: the next launch sweeps its folder
    assert not workdir.exists()


def test_wheel_fallback_unpacks_a_runnable_server(tmp_path, monkeypatch):
    # Without the wheel installed, labkit downloads it (no deps) and unpacks it into its cache.
    from labkit.plumbing import triton_dist

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dist = triton_dist.TritonDist(triton_dist._download_and_unpack(tmp_path / "labkit" / "unpacked"))
    assert os.access(dist.binary, os.X_OK)
    assert os.access(dist.stub_for((3, 11)), os.X_OK)
    with pytest.raises(labkit.errors.SetupError) as info:
        dist.stub_for((3, 12))
    assert info.value.missing == "Python backend stub for Python 3.12"
    version = subprocess.run(
        [str(dist.binary), "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "LD_LIBRARY_PATH": str(dist.lib_dir)},
    )
    assert "--model-repository" in version.stdout + version.stderr


def test_rss_counts_the_server_and_its_stubs(fresh_server):
    with_one_stub = fresh_server.runtime.rss_bytes()
    assert with_one_stub > 20 * 2**20  # tritonserver alone holds tens of MB
    cfg = fresh_server.repository.read_config("add_sub")
    cfg.name = "add_sub_twin"
    fresh_server.python_model("add_sub_twin", labkit.course.reference.add_sub_source(), cfg)  # one more stub process
    assert fresh_server.runtime.rss_bytes() > with_one_stub


_ORPHAN_MAKER = textwrap.dedent(
    """
    import time, labkit
    from labkit.plumbing import process_groups
    process_groups.die_with_parent = lambda parent: None  # as where the kernel offers no parent-death signal
    lab = labkit.start()
    lab.repository.copy_model_from(labkit.reference_repository(), "add_sub")
    lab.load("add_sub")
    print(lab.runtime.triton_pid, flush=True)
    time.sleep(120)
    """
)


def test_next_launch_ends_an_orphaned_server_and_frees_its_shared_memory():
    shm_before = set(os.listdir("/dev/shm"))
    owner = subprocess.Popen([sys.executable, "-c", _ORPHAN_MAKER], stdout=subprocess.PIPE, text=True)
    pid = int(owner.stdout.readline())
    shm_server = {name for name in set(os.listdir("/dev/shm")) - shm_before if name.startswith(f"labkit_{owner.pid}_")}
    owner.send_signal(signal.SIGKILL)
    assert shm_server, "the orphan's Python stub should hold a shared-memory region named after its owner"
    owner.wait(timeout=30)
    # Without the parent-death signal the server outlives its owner (unless another labkit process
    # launching right now has already swept it: the same code path, so the checks below still hold).
    try:
        labkit.server.EmbeddedServer()  # the next launch finds the orphan of a dead owner and ends it
        assert _gone(pid), "the orphaned tritonserver is still running"
    finally:
        if not _gone(pid, timeout_s=0.1):
            os.killpg(pid, signal.SIGKILL)
    within(
        lambda: not (_group_members(pid) or set(os.listdir("/dev/shm")) & shm_server),
        15,
        "the stubs to end and the shared memory to be freed",
        interval_s=0.2,
    )
    assert _group_members(pid) == [], "its Python stubs are still running"
    assert not set(os.listdir("/dev/shm")) & shm_server, "its shared-memory regions were not freed"


ADD_ONE = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() + 1)])
                for r in requests]
"""


def test_after_the_latest_server_stops_the_magics_use_the_one_still_running():
    from labkit import magics

    with labkit.server.EmbeddedServer() as lab, labkit.server.EmbeddedServer() as lab2:
        lab.start()
        lab2.start()
        assert labkit.current() is lab2
        lab2.stop()
        assert labkit.current() is lab
        lab.repository.write_config(
            labkit.model_config("plus_one", "python", [("X", "FP32", [2])], [("Y", "FP32", [2])])
        )
        magics.triton_python("plus_one", ADD_ONE)
        assert labkit.infer(lab, "plus_one", {"X": np.zeros(2, np.float32)})["Y"].tolist() == [1.0, 1.0]


@pytest.mark.timeout(600)
def test_rerunning_the_start_cell_leaves_one_server(tmp_path):
    """In a notebook, running `lab = labkit.start()` again stops the server the cell started before;
    a server started by another cell keeps running."""
    import nbformat
    from nbclient import NotebookClient

    start = "import labkit\nlab = labkit.start()"
    cells = [
        start,
        "first = lab",
        start,
        "other = labkit.start()",
        "print(first.alive, lab.alive, other.alive, len({id(first), id(lab), id(other)}))\n"
        "pids = [first.runtime.triton_pid, lab.runtime.triton_pid]\nlab.stop(); other.stop()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = [[o.get("text", "") for o in cell.outputs] for cell in nb.cells]
    assert outputs[0] == [] and outputs[3] == []  # a first start, and another cell's, say nothing
    (line,) = outputs[2]
    assert line.startswith("labkit: stopped the server this cell started before (127.0.0.1:") and line.count("\n") == 1
    assert outputs[4] == ["False True True 3\n"]
