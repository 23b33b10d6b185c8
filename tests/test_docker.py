"""The Docker launcher against a real engine and labkit's offline CPU image.

Without an engine these tests skip, saying why, unless CI is set: in CI they fail instead
(.ci/docker-engine.sh starts an engine on CI machines). The image is built once and then reused.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import docker.errors
import numpy as np
import pytest

import labkit
from labkit.reference import add_sub_source

ADD_SUB_SOURCE = add_sub_source()
from labkit.docker import cpu_image as lk_image
from labkit.docker import engine as lk_engine
from labkit.docker import leftovers as lk_leftovers
from labkit.server.launchers.docker import CONTAINER_PORTS, DockerServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dserver(cpu_image):
    with DockerServer(image=cpu_image) as srv:
        srv.start(timeout_s=120)
        srv.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        srv.load("add_sub")
        yield srv
    assert _gone(engine_client(), srv.runtime.container.id)


def engine_client():
    return lk_engine.connect()


def _gone(client, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
        return False
    except docker.errors.NotFound:
        return True


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
    deadline = time.monotonic() + 5
    while _successes(dserver, "add_sub") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _successes(dserver, "add_sub") >= 2


def _successes(server, model: str) -> int:
    return server.stats(model)["model_stats"][0]["inference_stats"]["success"]["count"]


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
    dserver.python_model("logger", ADD_SUB_SOURCE.replace("def execute(self, requests):",
                                                         "def execute(self, requests):\n        pb_utils.Logger.log_info('hello from the container')"),
                         _config_named("logger"))
    labkit.check_add_sub(dserver, "logger")
    deadline = time.monotonic() + 5
    while "hello from the container" not in dserver.logs.since(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "hello from the container" in dserver.logs.since(mark)  # the model's own log lines arrive too
    dserver.unload("logger")


def _config_named(name: str) -> labkit.ModelConfig:
    cfg = labkit.ModelRepository(labkit.reference_repository()).read_config("add_sub")
    cfg.name = name
    return cfg


# -- Python and C++ backends in the container ---------------------------------------------------------


def test_python_reload_serves_new_code(dserver):
    for offset in (10, 20):
        dserver.python_model("add_sub", ADD_SUB_SOURCE.replace("a + b", f"a + b + {offset}"))
        result = labkit.check_add_sub(dserver, check=False)
        np.testing.assert_allclose(result.output0, result.input0 + result.input1 + offset)
    dserver.python_model("add_sub", ADD_SUB_SOURCE)
    assert labkit.check_add_sub(dserver).ok


def test_python_model_runs_on_the_image_python(dserver):
    source = ADD_SUB_SOURCE.replace(
        "a + b", "a + b + float(sys.version_info[:2] == (3, 11)) + float(np.__version__ < '2')"
    ).replace("import triton_python_backend_utils", "import sys\nimport numpy as np\nimport triton_python_backend_utils")
    dserver.python_model("which_python", source, _config_named("which_python"))
    result = labkit.check_add_sub(dserver, "which_python", check=False)
    np.testing.assert_allclose(result.output0, result.input0 + result.input1 + 2)  # Python 3.11, numpy < 2
    dserver.unload("which_python")


SCALER = """
import json
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.scale = float(json.loads(args["model_config"])["parameters"]["scale"]["string_value"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "Y", self.scale * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
"""


def test_python_based_backend_from_the_host_backend_folder(dserver):
    dserver.python_backend("scaler", SCALER)
    stub = dserver.workspace.backend_dir / "python" / "stub" / "triton_python_backend_stub"  # labkit's launcher runs it
    assert os.readlink(stub) == "/opt/tritonserver/backends/python/triton_python_backend_stub"
    cfg = labkit.model_config("times3", "scaler", [("X", "FP32", [2])], [("Y", "FP32", [2])], parameters={"scale": 3})
    dserver.repository.write_config(cfg)
    dserver.load("times3")
    assert labkit.infer(dserver, "times3", {"X": np.array([1, -2], np.float32)})["Y"].tolist() == [3, -6]
    dserver.unload("times3")


MARKER_CONFIG = """
name: "marker"
backend: "labkitmarker"
max_batch_size: 0
input { name: "IN" data_type: TYPE_FP32 dims: 1 }
output { name: "OUT" data_type: TYPE_FP32 dims: 1 }
instance_group { count: 1 kind: KIND_CPU }
"""

# A self-contained backend: it answers every request with an error that names its build.
MARKER_SOURCE = r"""
#include <cstdint>
extern "C" {
struct TRITONSERVER_Error; struct TRITONBACKEND_Request; struct TRITONBACKEND_Response;
struct TRITONBACKEND_ModelInstance;
TRITONSERVER_Error* TRITONSERVER_ErrorNew(int code, const char* msg);
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);
TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response** response, TRITONBACKEND_Request* request);
TRITONSERVER_Error* TRITONBACKEND_ResponseSend(TRITONBACKEND_Response* response, uint32_t flags, TRITONSERVER_Error* error);
TRITONSERVER_Error* TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t flags);

__attribute__((visibility("default"))) TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request** requests, const uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Response* response = nullptr;
    if (TRITONBACKEND_ResponseNew(&response, requests[i]) == nullptr) {
      TRITONSERVER_Error* err = TRITONSERVER_ErrorNew(5, "MARKER build BUILD_ID");
      TRITONBACKEND_ResponseSend(response, 1, err);
      TRITONSERVER_ErrorDelete(err);
    }
    TRITONBACKEND_RequestRelease(requests[i], 1);
  }
  return nullptr;
}
}
"""


def _marker_answer(server) -> str:
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(server, "marker", {"IN": np.array([1], np.float32)})
    return str(info.value)


def test_cpp_backend_compiled_in_the_container_and_reloaded(dserver):
    dserver.repository.write_file("marker", "config.pbtxt", MARKER_CONFIG, version=None)
    source = MARKER_SOURCE.replace("BUILD_ID", f"one-{time.time_ns()}")
    versions = dserver.cpp_backend("labkitmarker", source, models=["marker"])
    assert "MARKER build one-" in _marker_answer(dserver)
    build = dserver.models.build("labkitmarker", source)
    assert build.cached and build.library.is_relative_to(dserver.runtime.build_root)
    # A rebuild goes to a new version folder, so the new code really serves (Triton never dlcloses).
    versions2 = dserver.cpp_backend("labkitmarker", source.replace("build one-", "build two-"), models=["marker"])
    assert versions2["marker"] == versions["marker"] + 1
    assert "MARKER build two-" in _marker_answer(dserver)
    dserver.unload("marker")


def test_reference_cpp_backend_builds_and_batches_in_the_container(dserver):
    from labkit import reference

    reference.serve(dserver, ["recommended_batching"])  # labkit's headers and backend.hpp, g++ of the image
    assert labkit.check_passthrough(dserver, "recommended_batching", concurrent=2).ok
    deadline = time.monotonic() + 5
    while _successes(dserver, "recommended_batching") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = dserver.stats("recommended_batching")["model_stats"][0]
    assert stats["inference_count"] == 2 and stats["execution_count"] >= 1
    dserver.unload("recommended_batching")


def test_cpp_compile_error_keeps_source_line_numbers(dserver):
    broken = "#include <cstdint>\n\nint f() { return undefined_name; }\n"
    with pytest.raises(labkit.BuildError, match=r"labkitbroken\.cc:3:.*undefined_name"):
        dserver.models.build("labkitbroken", broken, progress=False)


# -- failures ------------------------------------------------------------------------------------------


def test_container_killed_from_outside(cpu_image, tmp_path):
    server = DockerServer(workdir=tmp_path, image=cpu_image)
    with server.start(timeout_s=120):
        server.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        server.load("add_sub")
        client = lk_engine.connect()
        client.containers.get(server.runtime.container.id).kill()  # as `docker kill` would
        deadline = time.monotonic() + 15
        while server.alive and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.alive and not server.ready()
        with pytest.raises(labkit.ServerNotRunningError, match="exited") as info:
            server.models.index()
        assert "successfully loaded 'add_sub'" in info.value.log_tail
        with pytest.raises(labkit.ServerNotRunningError, match="exit code 137"):
            server.load("add_sub")
        container_id = server.runtime.container.id
    assert _gone(client, container_id)  # stop() removes the dead container
    assert (tmp_path / "logs" / "tritonserver.log").exists()  # the log stays for reading


def test_backend_crash_in_the_container_is_shown_at_its_line(cpu_image, tmp_path):
    """Built in the container, crashed in the container, mapped to the cell's line on the host."""
    from test_crash import SEGFAULT, _crash, _line_of

    server = DockerServer(workdir=tmp_path, image=cpu_image)
    with server.start(timeout_s=120):
        error = _crash(server, SEGFAULT)
    line = _line_of(SEGFAULT, "*nowhere = 1;")
    assert error.crash.startswith(f"The backend crashed with SIGSEGV at crashy.cc:{line}."), str(error)


def test_failed_start_carries_the_container_log(cpu_image, tmp_path):
    server = DockerServer(workdir=tmp_path, image=cpu_image, extra_args=["--model-control-mode=nonsense"])
    with pytest.raises(labkit.ServerStartError, match="exited during start-up") as info:
        server.start(timeout_s=60)
    assert 'Bad option: "--model-control-mode"' in info.value.log_tail
    assert not server.alive
    assert _gone(lk_engine.connect(), server.runtime.container.id)


def test_bad_image_name_is_a_clear_error(engine):
    with pytest.raises(labkit.SetupError, match=r"could not be pulled.*labkit image build"):
        DockerServer(image="labkit/no-such-image:0", progress=False).start()
    with pytest.raises(labkit.SetupError, match="not a valid Docker image name"):
        DockerServer(image="Not A Valid Image").start()
    with pytest.raises(labkit.SetupError, match=r"not on this engine \(and pull=False\)"):
        DockerServer(image="labkit/no-such-image:0", pull=False).start()


def test_missing_bind_source_is_refused_not_created(engine, tmp_path):
    missing = tmp_path / "no-such-folder"
    before = _mine()
    server = DockerServer(image=lk_image.IMAGE, volumes={missing: "/data:ro"})
    with pytest.raises(labkit.SetupError, match="does not exist"):
        server.start()
    assert not missing.exists()
    assert _mine() == before  # no container was created


def _mine() -> set[str]:
    """This process's labkit containers (other test sessions may share the engine)."""
    owner = f"{socket.gethostname()}:{os.getpid()}"
    return {c.id for c in lk_leftovers.leftovers(all=True) if c.labels.get(lk_leftovers.LABEL_OWNER) == owner}


def test_gpu_option(engine):
    with pytest.raises(ValueError, match="gpus"):
        DockerServer(gpus="yes")
    if lk_engine.gpu_runtime(engine) is None:
        with pytest.raises(labkit.SetupError, match="no GPU runtime"):
            DockerServer(image=lk_image.IMAGE, gpus=True).start()


def test_no_engine_says_how_to_start_one(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(labkit.SetupError, match=r"No Docker engine is reachable.*dockerd.*docker-engine\.sh"):
        lk_engine.connect()
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
    assert dserver.runtime.container.id not in {c.id for c in lk_leftovers.leftovers()}  # a live owner's container is not
    removed = lk_leftovers.cleanup()
    assert client.ping()  # the engine is still fine
    assert _gone(client, container_id) and removed
    assert not Path(workdir).exists()  # its temporary work folder went too
    assert dserver.alive


def test_launch_sweeps_leftovers(dserver, tmp_path):
    # A container labelled as labkit's by a process that no longer exists ...
    dead = subprocess.Popen(["true"])
    dead.wait()
    client = lk_engine.connect()
    leftover = client.containers.run(
        dserver.runtime.image, ["sleep", "600"], detach=True,
        labels={lk_leftovers.LABEL_MANAGED: "1", lk_leftovers.LABEL_OWNER: f"{socket.gethostname()}:{dead.pid}"},
    )
    try:
        # ... is removed by the next launch, even one that then fails (here: a missing mount source).
        with pytest.raises(labkit.SetupError):
            DockerServer(image=dserver.runtime.image, volumes={tmp_path / "missing": "/data"}).start()
        assert _gone(client, leftover.id)
    finally:
        if not _gone(client, leftover.id):
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
    cmd = [sys.executable, "-m", "labkit.cli", "bench", "--server", "docker", "--only", "cold_start_s", "--json", str(out)]
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
        deadline = time.monotonic() + 15
        while server.health.died is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.health.died is not None, "the watchdog did not notice the container's death"
        assert server.restart(timeout_s=120) == ["add_sub"]
        assert labkit.check_add_sub(server).ok


def test_timeline_and_perf_analyzer_against_the_container(dserver):
    # Triton writes its trace file into a folder mounted from the host; perf_analyzer runs on the host
    # against the published port.
    with labkit.timeline(dserver, "add_sub") as tl:
        labkit.run_load(dserver, "add_sub", {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)},
                        requests=20, concurrency=2)
    assert tl.counts()["requests"] == 20 and tl.agrees_with_statistics()
    sweep = labkit.perf(dserver, "add_sub", concurrency=[2], measurement_ms=500, stability_percent=50, progress=False)
    assert sweep.steps[0].throughput > 0 and sweep.steps[0].compute_infer_us > 0


# -- a stuck model in the container: live stacks, unstick, breakpoints ------------------------------------


def test_stuck_models_in_the_container_show_their_lines(dserver):
    from test_stuck import CONFIG, HANG_LINE, SPIN_LINE, SPINNING, X, _hanging

    assert all(tool.found for tool in labkit.debug_tools(dserver)), [str(t) for t in labkit.debug_tools(dserver)]
    dserver.repository.write_config(CONFIG)
    dserver.python_model("hang", _hanging(1, "time.sleep(100000)"))
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.infer(dserver, "hang", X, timeout_s=2)
    assert f"model.py:{HANG_LINE} in TritonPythonModel.execute:  time.sleep(100000)" in info.value.stack
    dserver.repository.write_python_model("hang", _hanging(4, "pass"))
    dserver.unstick("hang")
    assert labkit.infer(dserver, "hang", X)["OUT0"].tolist() == [4.0] * 4

    cfg = labkit.model_config("spinner", "spinny", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    dserver.repository.write_config(cfg)
    dserver.cpp_backend("spinny", SPINNING, ["spinner"], progress=False)
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.infer(dserver, "spinner", {"IN0": np.zeros(4, np.int32)}, timeout_s=2)
    assert f"spinny.cc:{SPIN_LINE} in operator():  spins = spins + 1;  // the endless loop" in info.value.stack
    assert labkit.check_add_sub(dserver).ok
    dserver.restart()  # the spinning thread cannot be ended otherwise; the module's other tests go on


def test_a_stuck_initialize_in_the_container_times_out_and_the_fix_loads(dserver):
    from test_load_timeout import CONFIG, SLEEPS, STUCK_LINE, X, _initializing

    dserver.repository.write_config(CONFIG)
    with pytest.raises(labkit.LoadTimeoutError) as info:
        dserver.python_model("hang", _initializing(SLEEPS), load_timeout_s=2)
    assert info.value.ended and info.value.location == f"model.py:{STUCK_LINE}"
    assert f"model.py:{STUCK_LINE} in TritonPythonModel.initialize" in info.value.stack
    assert labkit.check_add_sub(dserver).ok
    dserver.python_model("hang", _initializing("pass"))
    assert labkit.infer(dserver, "hang", X)["OUT0"].tolist() == [7.0] * 4


def test_a_breakpoint_in_the_container_opens_pdb_here(cpu_image, tmp_path):
    from test_breakpoints import CHILD, MODEL, Terminal

    model = tmp_path / "model.py"
    model.write_text(MODEL)
    term = Terminal([sys.executable, "-c", CHILD, "http", "1", str(model), "docker", cpu_image])
    term.expect("READY", timeout_s=180)
    term.expect(r"model\.py\(12\)execute\(\)[\s\S]*?\(Pdb\) ")
    term.pdb("p scale", r"^2\.0\n$")
    term.pdb("scale = 3.0", r"^$")
    term.send("c")
    term.expect(r"ANSWER \[3\.0, 3\.0, 3\.0, 3\.0\]")
    assert term.close() == 0
