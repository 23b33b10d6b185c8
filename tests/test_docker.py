"""The Docker launcher against a real engine and labkit's offline CPU image: launch, requests,
failures, leftovers and the command line (backends in the container: test_docker_backends.py).

Without an engine these tests skip, saying why, unless CI is set: in CI they fail instead
(.ci/docker-engine.sh starts an engine on CI machines). The image is built once and then reused.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from docker_support import ADD_SUB_SOURCE, config_named, gone, successes
from waiting_support import within

import labkit
import labkit.errors
import labkit.server
from labkit.docker import cpu_image as lk_image, engine as lk_engine, orphans as lk_leftovers
from labkit.server.launchers.docker import CONTAINER_PORTS, DockerServer

pytestmark = pytest.mark.slow


# -- launch, readiness, requests ------------------------------------------------------------------


def test_launch_ready_version_and_labels(dserver):
    assert dserver.runtime.kind == "docker" and dserver.alive and dserver.ready()
    assert dserver.version == "2.41.0"
    assert len({dserver.endpoints.http_port, dserver.endpoints.grpc_port, dserver.endpoints.metrics_port}) == 3
    labels = dserver.runtime.container.labels
    assert labels[lk_leftovers.LABEL_MANAGED] == "1"
    assert labels[lk_leftovers.LABEL_OWNER] == f"{socket.gethostname()}:{os.getpid()}"
    assert not lk_leftovers.owner_dead(labels)
    host_config = dserver.runtime.container.attrs["HostConfig"]
    assert host_config["ShmSize"] == 1 << 30
    assert {u["Name"]: u["Soft"] for u in host_config["Ulimits"]}["stack"] == 67108864
    assert host_config["AutoRemove"] is False
    assert "nv_inference_request_success" in dserver.models.metrics_text()


def test_add_sub_over_http_and_grpc(dserver):
    assert labkit.check_add_sub(dserver, protocol="http").ok
    assert labkit.check_add_sub(dserver, protocol="grpc").ok
    # Triton counts a request once the backend has reported it, which may be just after the answer.
    within(lambda: successes(dserver, "add_sub") >= 2, 5, "two successes counted")
    assert successes(dserver, "add_sub") >= 2


def test_ports_published_on_loopback_only(dserver):
    dserver.runtime.container.reload()
    published = dserver.runtime.container.attrs["NetworkSettings"]["Ports"]
    for port in CONTAINER_PORTS.values():
        assert [b["HostIp"] for b in published[f"{port}/tcp"]] == ["127.0.0.1"]
    # Reachable on loopback, refused on the host's other addresses (the engine's bridge gateway).
    with socket.create_connection(("127.0.0.1", dserver.endpoints.http_port), timeout=5):
        pass
    network = dserver.runtime.container.attrs["NetworkSettings"]
    gateway = network.get("Gateway") or next(iter(network["Networks"].values()))["Gateway"]
    with pytest.raises(OSError):
        socket.create_connection((gateway, dserver.endpoints.http_port), timeout=3).close()


def test_logs_stream_into_the_log_view(dserver):
    assert dserver.logs.path.parent.parent == dserver.workspace.workdir
    text = dserver.logs.text()
    assert "Started HTTPService at 0.0.0.0:8000" in text  # inside the container; published on 127.0.0.1
    assert "successfully loaded 'add_sub'" in text
    mark = dserver.logs.mark()
    dserver.python_model(
        "logger",
        ADD_SUB_SOURCE.replace(
            "def execute(self, requests):",
            "def execute(self, requests):\n        pb_utils.Logger.log_info('hello from the container')",
        ),
        config_named("logger"),
    )
    labkit.check_add_sub(dserver, "logger")
    within(lambda: "hello from the container" in dserver.logs.since(mark), 5, "the model's log line", interval_s=0.05)
    assert "hello from the container" in dserver.logs.since(mark)  # the model's own log lines arrive too
    dserver.unload("logger")


# -- failures ------------------------------------------------------------------------------------------


def test_container_killed_from_outside(cpu_image, tmp_path):
    server = DockerServer(workdir=tmp_path, image=cpu_image)
    with server.start(timeout_s=120):
        server.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        server.load("add_sub")
        client = lk_engine.connect()
        client.containers.get(server.runtime.container.id).kill()  # as `docker kill` would
        within(lambda: not server.alive, 15, "the server to be seen dead", interval_s=0.05)
        assert not server.alive and not server.ready()
        with pytest.raises(labkit.errors.ServerNotRunningError) as info:
            server.models.index()
        assert info.value.exit_summary and not info.value.stopped
        assert "successfully loaded 'add_sub'" in info.value.log_tail
        with pytest.raises(labkit.errors.ServerNotRunningError) as info:
            server.load("add_sub")
        assert info.value.exit_summary == "exit code 137"
        container_id = server.runtime.container.id
    assert gone(client, container_id)  # stop() removes the dead container
    assert (tmp_path / "logs" / "tritonserver.log").exists()  # the log stays for reading


def test_backend_crash_in_the_container_is_shown_at_its_line(cpu_image, tmp_path):
    """Built in the container, crashed in the container, mapped to the cell's line on the host."""
    from crash_support import SEGFAULT, crash_site, crash_with, line_of

    server = DockerServer(workdir=tmp_path, image=cpu_image)
    with server.start(timeout_s=120):
        error = crash_with(server, SEGFAULT)
        assert crash_site(server) == ("SIGSEGV", "", "crashy.cc", line_of(SEGFAULT, "*nowhere = 1;"))
        assert error.crash == str(server.crash())


def test_failed_start_carries_the_container_log(cpu_image, tmp_path):
    server = DockerServer(workdir=tmp_path, image=cpu_image, extra_args=["--model-control-mode=nonsense"])
    with pytest.raises(labkit.errors.ServerStartError) as info:
        server.start(timeout_s=60)
    assert info.value.exit_summary.startswith("exit code")  # it exited during start-up
    assert 'Bad option: "--model-control-mode"' in info.value.log_tail
    assert not server.alive
    assert gone(lk_engine.connect(), server.runtime.container.id)


def test_bad_image_name_is_a_clear_error(engine):
    with pytest.raises(labkit.errors.SetupError) as info:
        DockerServer(image="labkit/no-such-image:0", progress=False).start()
    assert (info.value.missing, info.value.reason) == ("labkit/no-such-image:0", "pull failed")
    with pytest.raises(labkit.errors.SetupError) as info:
        DockerServer(image="Not A Valid Image").start()
    assert (info.value.missing, info.value.reason) == ("Not A Valid Image", "invalid image name")
    with pytest.raises(labkit.errors.SetupError) as info:
        DockerServer(image="labkit/no-such-image:0", pull=False).start()
    assert (info.value.missing, info.value.reason) == ("labkit/no-such-image:0", "not pulled")


def test_missing_bind_source_is_refused_not_created(engine, tmp_path):
    missing = tmp_path / "no-such-folder"
    before = _mine()
    server = DockerServer(image=lk_image.IMAGE, volumes={missing: "/data:ro"})
    with pytest.raises(labkit.errors.SetupError) as info:
        server.start()
    assert (info.value.missing, info.value.reason) == (str(missing), "mount source does not exist")
    assert not missing.exists()
    assert _mine() == before  # no container was created


def _mine() -> set[str]:
    """This process's labkit containers (other test sessions may share the engine)."""
    owner = f"{socket.gethostname()}:{os.getpid()}"
    return {c.id for c in lk_leftovers.leftovers(all=True) if c.labels.get(lk_leftovers.LABEL_OWNER) == owner}


def test_gpu_option(engine):
    with pytest.raises(labkit.errors.OptionError) as refused:
        DockerServer(gpus="yes")
    assert (refused.value.option, refused.value.value) == ("gpus", "yes") and isinstance(refused.value, ValueError)
    if lk_engine.gpu_runtime(engine) is None:
        with pytest.raises(labkit.errors.SetupError) as info:
            DockerServer(image=lk_image.IMAGE, gpus=True).start()
        assert info.value.missing == "GPU runtime"


def test_no_engine_says_how_to_start_one(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(labkit.errors.SetupError) as info:
        lk_engine.connect()
    assert (info.value.missing, info.value.reason) == ("Docker engine", "unreachable")  # message: test_error_messages
    assert lk_engine.engine_status()[0] is False


# -- leftovers ------------------------------------------------------------------------------------------

_OWNER = textwrap.dedent("""
    import sys, time
    from labkit.server.launchers.docker import DockerServer
    server = DockerServer(image=sys.argv[1]).start(timeout_s=120)
    print(server.runtime.container.id, server.workspace.workdir, flush=True)
    time.sleep(600)
""")


def test_cleanup_removes_the_container_of_a_killed_kernel(dserver):
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, dserver.runtime.image], stdout=subprocess.PIPE, text=True)
    try:
        container_id, workdir = owner.stdout.readline().split()
    finally:
        owner.kill()  # SIGKILL: no atexit, nothing stops the container
        owner.wait()
    client = lk_engine.connect()
    assert client.containers.get(container_id).status == "running"  # the leftover
    assert container_id in {c.id for c in lk_leftovers.leftovers()}
    assert dserver.runtime.container.id not in {
        c.id for c in lk_leftovers.leftovers()
    }  # a live owner's container is not
    removed = lk_leftovers.cleanup()
    assert client.ping()  # the engine is still fine
    assert gone(client, container_id) and removed
    assert not Path(workdir).exists()  # its temporary work folder went too
    assert dserver.alive


def test_launch_sweeps_leftovers(dserver, tmp_path):
    # A container labelled as labkit's by a process that no longer exists ...
    dead = subprocess.Popen(["true"])
    dead.wait()
    client = lk_engine.connect()
    leftover = client.containers.run(
        dserver.runtime.image,
        ["sleep", "600"],
        detach=True,
        labels={lk_leftovers.LABEL_MANAGED: "1", lk_leftovers.LABEL_OWNER: f"{socket.gethostname()}:{dead.pid}"},
    )
    try:
        # ... is removed by the next launch, even one that then fails (here: a missing mount source).
        with pytest.raises(labkit.errors.SetupError):
            DockerServer(image=dserver.runtime.image, volumes={tmp_path / "missing": "/data"}).start()
        assert gone(client, leftover.id)
    finally:
        if not gone(client, leftover.id):
            leftover.remove(force=True)
    assert dserver.alive


# -- the command line with --server docker ---------------------------------------------------------


def test_demo_on_docker_writes_the_same_sections(cpu_image, tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "demo.json"
    cmd = [sys.executable, "-m", "labkit.cli", "demo", "--server", "docker", "--image", cpu_image, "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["server"] == "docker" and report["server_version"] == "2.41.0"
    assert {"add_sub", "minimal", "recommended", "custom", "batching"} <= set(report)
    assert report["minimal"]["minimal_batching"]["largest_batch"] == 2
    assert all(report[s]["ok"] for s in ("add_sub", "minimal", "recommended", "custom", "batching"))


def test_bench_cold_start_on_docker(cpu_image, tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "bench.json"
    cmd = [
        sys.executable,
        "-m",
        "labkit.cli",
        "bench",
        "--server",
        "docker",
        "--only",
        "cold_start_s",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    assert results["server"] == "docker" and results["cold_start_s"] > 0


def test_container_is_unprivileged_without_host_network(dserver):
    dserver.runtime.container.reload()
    host = dserver.runtime.container.attrs["HostConfig"]
    assert host["Privileged"] is False
    assert host["NetworkMode"] != "host"
    assert not host.get("CapAdd")


def test_restart_after_the_container_is_killed(cpu_image, tmp_path):
    server = DockerServer(workdir=tmp_path, image=cpu_image)
    with server.start(timeout_s=120):
        server.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        server.load("add_sub")
        lk_engine.connect().containers.get(server.runtime.container.id).kill()
        within(lambda: server.health.died is not None, 15, "the watchdog to notice", interval_s=0.05)
        assert server.health.died is not None, "the watchdog did not notice the container's death"
        assert server.restart(timeout_s=120) == ["add_sub"]
        assert labkit.check_add_sub(server).ok
