"""Python and C++ backends in labkit's CPU container: reloads, the image's Python, compiled
backends, timelines and perf_analyzer, stuck models and breakpoints (the launcher itself:
test_docker.py). Skipped without a Docker engine unless CI is set, as test_docker.py says."""

from __future__ import annotations

import os
import re
import sys
import time

import numpy as np
import pytest
from docker_support import ADD_SUB_SOURCE, config_named, successes
from waiting_support import within

import labkit

pytestmark = pytest.mark.slow


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
    ).replace(
        "import triton_python_backend_utils", "import sys\nimport numpy as np\nimport triton_python_backend_utils"
    )
    dserver.python_model("which_python", source, config_named("which_python"))
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
    return info.value.reason


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
    from labkit.course import reference

    reference.serve(dserver, ["recommended_batching"])  # labkit's headers and backend.hpp, g++ of the image
    assert labkit.check_passthrough(dserver, "recommended_batching", concurrent=2).ok
    within(lambda: successes(dserver, "recommended_batching") >= 2, 5, "two successes counted")
    stats = dserver.stats("recommended_batching")["model_stats"][0]
    assert stats["inference_count"] == 2 and stats["execution_count"] >= 1
    dserver.unload("recommended_batching")


def test_official_recommended_builds_in_the_container_and_passes_its_client(dserver, backend_examples):
    """backend r23.12's recommended example, unchanged, in official mode with the image's g++ (Triton's
    sources and RapidJSON copied into the mounted build cache)."""
    import subprocess

    examples = backend_examples
    dserver.repository.copy_model_from(examples / "model_repos" / "recommended_models", "batching")
    source = (examples / "backends" / "recommended" / "src" / "recommended.cc").read_text()
    assert dserver.cpp_backend("recommended", source, models=["batching"]) == {"batching": 1}
    proc = subprocess.run(
        [sys.executable, str(examples / "clients" / "recommended_client"), "-u", dserver.endpoints.http_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "OUTPUT = [[[10.  10.1" in proc.stdout, proc.stdout + proc.stderr
    dserver.unload("batching")


def test_cpp_compile_error_keeps_source_line_numbers(dserver):
    broken = "#include <cstdint>\n\nint f() { return undefined_name; }\n"
    with pytest.raises(labkit.BuildError) as info:
        dserver.models.build("labkitbroken", broken, progress=False)
    assert info.value.backend == "labkitbroken"
    assert re.search(r"labkitbroken\.cc:3:.*undefined_name", info.value.compiler_output), info.value.compiler_output


def test_timeline_and_perf_analyzer_against_the_container(dserver):
    # Triton writes its trace file into a folder mounted from the host; perf_analyzer runs on the host
    # against the published port.
    with labkit.timeline(dserver, "add_sub") as tl:
        labkit.run_load(
            dserver,
            "add_sub",
            {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)},
            requests=20,
            concurrency=2,
        )
    assert tl.counts()["requests"] == 20 and tl.agrees_with_statistics()
    sweep = labkit.perf(dserver, "add_sub", concurrency=[2], measurement_ms=500, stability_percent=50, progress=False)
    assert sweep.steps[0].throughput > 0 and sweep.steps[0].compute_infer_us > 0


# -- a stuck model in the container: live stacks, unstick, breakpoints ------------------------------------


def test_stuck_models_in_the_container_show_their_lines(dserver):
    from stuck_support import CONFIG, HANG_LINE, SPIN_LINE, SPINNING, X, hanging

    assert all(tool.found for tool in labkit.debug_tools(dserver)), [str(t) for t in labkit.debug_tools(dserver)]
    dserver.repository.write_config(CONFIG)
    dserver.python_model("hang", hanging(1, "time.sleep(100000)"))
    with pytest.raises(labkit.RequestTimeoutError) as info:
        labkit.infer(dserver, "hang", X, timeout_s=2)
    assert f"model.py:{HANG_LINE} in TritonPythonModel.execute:  time.sleep(100000)" in info.value.stack
    dserver.repository.write_python_model("hang", hanging(4, "pass"))
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
    from stuck_support import CONFIG, SLEEPS, STUCK_LINE, X, initializing

    dserver.repository.write_config(CONFIG)
    with pytest.raises(labkit.LoadTimeoutError) as info:
        dserver.python_model("hang", initializing(SLEEPS), load_timeout_s=2)
    assert info.value.ended and info.value.location == f"model.py:{STUCK_LINE}"
    assert f"model.py:{STUCK_LINE} in TritonPythonModel.initialize" in info.value.stack
    assert labkit.check_add_sub(dserver).ok
    dserver.python_model("hang", initializing("pass"))
    assert labkit.infer(dserver, "hang", X)["OUT0"].tolist() == [7.0] * 4


def test_a_breakpoint_in_the_container_opens_pdb_here(cpu_image, tmp_path):
    from terminal_support import CHILD, MODEL, Terminal

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
