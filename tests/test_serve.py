"""`labkit serve` as a drop-in for `tritonserver --model-repository`: Triton's ports (or those asked
for, a taken one refused at once), a person's backend folder, auto-complete for a model without a
config, the models' log lines on the terminal and the log kept, and a person's repository served as
it is (nothing built or written into it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from serve_support import Serve, listing

import labkit
import labkit.errors
import labkit.repository
import labkit.server
from labkit.plumbing.ports import free_ports

LABKIT = [sys.executable, "-m", "labkit.cli"]

ECHO = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [2]})
        config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]})
        return config

    def initialize(self, args):
        print("hello from initialize", flush=True)

    def execute(self, requests):
        print("hello from execute", flush=True)
        pb_utils.Logger.log_info("a line from pb_utils.Logger")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 2)])
                for r in requests]
"""

CONFIG = (
    'name: "{name}"\nbackend: "{backend}"\ninput {{ name: "IN" data_type: TYPE_FP32 dims: [ 2 ] }}\n'
    'output {{ name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] }}\n'
)


def test_a_taken_port_fails_at_once_and_named(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with pytest.raises(labkit.errors.PortTakenError) as caught:
            labkit.start(tmp_path, grpc_port=taken)
        assert (caught.value.port, caught.value.service) == (taken, "grpc")
        started = time.monotonic()
        proc = subprocess.run(
            [*LABKIT, "serve", str(tmp_path), "--any-ports", "--http-port", str(taken)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert time.monotonic() - started < 30  # no retries
    assert proc.returncode == 3 and proc.stderr.startswith("labkit: ") and f"Port {taken} (http)" in proc.stderr


def test_fixed_ports_are_the_ones_served(tmp_path):
    http, grpc, metrics = free_ports(3)
    with labkit.start(tmp_path, http_port=http, grpc_port=grpc, metrics_port=metrics) as lab:
        assert (lab.endpoints.http_port, lab.endpoints.grpc_port, lab.endpoints.metrics_port) == (http, grpc, metrics)
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=5) as resp:
            assert resp.status == 200
        assert lab.endpoints.metrics_url == f"http://127.0.0.1:{metrics}/metrics"
        assert isinstance(lab.models.metrics_text(), str)  # the metrics service answers there
        lab.restart()  # the same ports again
        assert lab.endpoints.http_port == http and lab.ready()


def test_a_model_without_config_loads_with_auto_complete(tmp_path):
    labkit.repository.ModelRepository(tmp_path).write_python_model("echo", ECHO)  # echo/1/model.py only
    with labkit.start(tmp_path) as lab:
        with pytest.raises(labkit.errors.MissingConfigError) as caught:  # a RepositoryError, as a ConfigError
            lab.load("echo")
        assert caught.value.missing == "config.pbtxt" and caught.value.lacks == ["config.pbtxt"]
        config = str(lab.repository.model_dir("echo") / "config.pbtxt")
        assert caught.value.model == "echo" and caught.value.source == config
    with labkit.start(tmp_path, auto_complete=True) as lab:
        lab.load("echo")
        out = labkit.infer(lab, "echo", {"IN": np.array([1.0, 2.0], np.float32)})
        np.testing.assert_allclose(out["OUT"], [2.0, 4.0])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_shows_the_models_lines_and_keeps_the_log(tmp_path, sig):
    labkit.repository.ModelRepository(tmp_path).write_python_model("echo", ECHO)  # auto-complete makes its config
    serve = Serve(str(tmp_path), "--any-ports")
    try:
        assert serve.lines["serving"] == "echo"
        serve.wait_for("auto-complete on: echo has no config.pbtxt")
        serve.wait_for("hello from initialize")
        with urllib.request.urlopen(
            urllib.request.Request(
                serve.lines["http"] + "/v2/models/echo/infer",
                method="POST",
                data=b'{"inputs":[{"name":"IN","datatype":"FP32","shape":[2],"data":[1,2]}]}',
            ),
            timeout=10,
        ) as resp:
            assert b"[2.0,4.0]" in resp.read()
        serve.wait_for("hello from execute")
        serve.wait_for("a line from pb_utils.Logger")
        out = serve.stop(sig)
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert serve.proc.returncode == 0 and "stopped." in out
    kept = Path(out.split("log kept ", 1)[1].split("\n", 1)[0])
    assert kept == Path(serve.lines["log"]) and "hello from execute" in kept.read_text()
    assert not any("Failed to initialize NVML" in line for line in serve.err)  # CPU-only noise stays hidden


def test_a_persons_repository_is_served_as_it_is(tmp_path):
    """A model of backend "minimal" with no library: a clear load failure, and nothing written."""
    repo = tmp_path / "repo"
    (repo / "mine" / "1").mkdir(parents=True)
    (repo / "mine" / "config.pbtxt").write_text(CONFIG.format(name="mine", backend="minimal"))
    before = listing(repo)
    serve = Serve(str(repo), "--any-ports")
    try:
        assert serve.lines["serving"] == "no models"
        serve.wait_for("NOT LOADED mine")
        serve.stop(signal.SIGTERM)
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert serve.proc.returncode == 0 and "libtriton_minimal.so" in "".join(serve.err)
    assert listing(repo) == before
    with labkit.start(repo) as lab:
        with pytest.raises(labkit.ModelLoadError) as caught:
            lab.load("mine")
    assert caught.value.model == "mine" and "minimal" in caught.value.reason
    assert listing(repo) == before


def test_backends_of_a_persons_folder_serve_and_python_is_refused(tmp_path):
    backends, repo = tmp_path / "backends", tmp_path / "repo"
    (backends / "doubler").mkdir(parents=True)
    (backends / "doubler" / "model.py").write_text(ECHO)  # a Python-based backend
    (repo / "twice" / "1").mkdir(parents=True)
    (repo / "twice" / "config.pbtxt").write_text(CONFIG.format(name="twice", backend="doubler"))
    before = listing(backends)
    with labkit.start(repo, backend_directory=backends) as lab:
        lab.load("twice")
        out = labkit.infer(lab, "twice", {"IN": np.array([3.0, 4.0], np.float32)})
        np.testing.assert_allclose(out["OUT"], [6.0, 8.0])
    assert listing(backends) == before
    (backends / "python").mkdir()
    with pytest.raises(labkit.errors.BackendClashError) as caught:
        labkit.start(repo, backend_directory=backends)
    assert (caught.value.backend, caught.value.directory) == ("python", str(backends.resolve()))
    assert os.listdir(backends / "python") == []


@pytest.mark.slow
def test_docker_publishes_the_ports_asked_for_and_serves_a_persons_backends(cpu_image, tmp_path):
    from labkit.server.launchers.docker import DockerServer

    backends, repo = tmp_path / "backends", tmp_path / "repo"
    (backends / "doubler").mkdir(parents=True)
    (backends / "doubler" / "model.py").write_text(ECHO)
    (repo / "twice" / "1").mkdir(parents=True)
    (repo / "twice" / "config.pbtxt").write_text(CONFIG.format(name="twice", backend="doubler"))
    before = listing(backends)
    http, grpc, metrics = free_ports(3)
    with DockerServer(
        repo, image=cpu_image, http_port=http, grpc_port=grpc, metrics_port=metrics, backend_directory=backends
    ) as lab:
        lab.start(timeout_s=120)
        assert (lab.endpoints.http_port, lab.endpoints.grpc_port, lab.endpoints.metrics_port) == (http, grpc, metrics)
        lab.load("twice")
        out = labkit.infer(lab, "twice", {"IN": np.array([3.0, 4.0], np.float32)})
        np.testing.assert_allclose(out["OUT"], [6.0, 8.0])
    assert listing(backends) == before


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_labkits_own_repository_is_served_from_a_copy_and_notebook_02_still_passes():
    """`make serve` twice (`labkit serve model_repository` in the checkout): each run builds and serves a
    copy that is gone when it stops, the checkout's model_repository/ is as it was, and notebook 02, which
    copies models from it, passes under nbval after them."""
    checkout = Path(labkit.__file__).resolve().parents[1]
    shipped = labkit.reference_repository()
    before = listing(shipped)

    def git_status() -> str:  # as git sees the folder (a developer's own uncommitted edits stay theirs)
        if not (checkout / ".git").exists():
            return ""
        return subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", "model_repository"],
            cwd=checkout,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    status = git_status()
    served = []
    for _ in range(2):
        serve = Serve("model_repository", "--any-ports", cwd=checkout)
        try:
            served.append(Path(serve.lines["repository"].split(" (", 1)[0]))
            assert "minimal_batching" in serve.lines["serving"].split(", ")
            assert (served[-1] / "minimal_batching" / "1" / "libtriton_minimal.so").is_file()
            serve.stop(signal.SIGINT)
        finally:
            if serve.proc.poll() is None:
                serve.proc.kill()
        assert serve.proc.returncode == 0
        assert not served[-1].exists()  # the copy went with the server
    assert served[0] != served[1] and listing(shipped) == before and git_status() == status
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval", "-q", "notebooks/02_cpp_backends.ipynb"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_the_python_backends_shared_memory_is_set_as_tritonserver_takes_it(tmp_path):
    """`--backend-config=python,shm-default-byte-size=N`, as tritonserver takes it: each Python instance's
    region in /dev/shm starts at N bytes (3 MiB + 4 KiB here: a size no default gives)."""
    size = 3 * 2**20 + 4096
    repo = tmp_path / "repo"
    labkit.repository.ModelRepository(repo).copy_model_from(labkit.reference_repository(), "add_sub")
    before = {p.name for p in Path("/dev/shm").iterdir()}
    serve = Serve(str(repo), "--any-ports", f"--backend-config=python,shm-default-byte-size={size}")
    try:
        assert serve.lines["serving"] == "add_sub"
        made = {p.name: p.stat().st_size for p in Path("/dev/shm").iterdir() if p.name not in before}
        assert size in made.values(), made
        serve.stop(signal.SIGTERM)
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert serve.proc.returncode == 0
