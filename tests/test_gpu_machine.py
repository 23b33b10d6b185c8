"""What only a machine with an NVIDIA GPU can show: KIND_GPU models (the CUDA kernel backend on its
instance's device 0), GPU metrics, CUDA shared memory end to end, GPU memory in the helper layer, cupy
through DLPack. Without a GPU (CI) every test here skips,
saying why; tests/test_cuda_build.py and tests/unit/test_gpu_cpu_side.py cover the CPU side."""

from __future__ import annotations

import re

import numpy as np
import pytest

import labkit
import labkit.server
from labkit.course import gpu_lesson as examples, reference
from labkit.gpu import detect, metrics as gpu_metrics
from labkit.native import cuda_kit
from labkit.observe.stats import parse_metrics

pytestmark = pytest.mark.skipif(not detect.visible(), reason=f"needs a GPU: {detect.probe().line()}")

SPECS = dict(
    inputs=[("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])],
    outputs=[("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4])],
)
A, B = np.arange(4, dtype=np.float32), np.full(4, 2, np.float32)


@pytest.fixture(scope="module")
def gpu_lab():
    with labkit.server.EmbeddedServer() as lab:
        lab.start()
        yield lab


def test_kind_gpu_python_model_on_gpu_0(gpu_lab):
    cfg = labkit.model_config("add_sub_gpu", "python", kind="GPU", gpus=[0], **SPECS)
    gpu_lab.python_model("add_sub_gpu", reference.add_sub_source(), cfg)
    assert labkit.check_add_sub(gpu_lab, model="add_sub_gpu").ok
    assert gpu_lab.model_config("add_sub_gpu")["instance_group"][0]["kind"] == "KIND_GPU"


def test_gpu_metrics_exported(gpu_lab):
    gpus = gpu_metrics.usage(parse_metrics(gpu_lab.models.metrics_text()))
    assert len(gpus) == len(detect.probe().gpus) and all(g.memory_total > 0 for g in gpus)


def test_cuda_kernel_backend_on_kind_gpu_uses_its_device_and_answers_over_http_and_cuda_shared_memory(gpu_lab):
    pytest.importorskip(
        "cuda.bindings.runtime", reason="CUDA shared memory needs cuda-python: pip install 'labkit[gpu]'"
    )
    cuda_kit.locate()
    config = examples.cuda_add_sub_config()  # instance_group [{ kind: KIND_GPU, count: 1, gpus: [0] }]
    gpu_lab.repository.write_config(config)
    mark = gpu_lab.logs.mark()
    gpu_lab.cpp_backend("cuda_add_sub", examples.CUDA_ADD_SUB.read_text(), cuda=True, first_line=2)
    group = gpu_lab.model_config("cuda_add_sub")["instance_group"][0]
    assert group["kind"] == "KIND_GPU" and [int(g) for g in group["gpus"]] == [0]
    gpu_lab.logs.settle()
    # the backend's TRITONBACKEND_ModelInstanceInitialize logs what Triton told the instance: KIND_GPU, device 0
    assert re.search(r"instance cuda_add_sub_0\S*: KIND_GPU on device 0", gpu_lab.logs.since(mark)), gpu_lab.logs.since(
        mark
    )
    for shared in (None, "cuda"):
        out = labkit.infer(gpu_lab, "cuda_add_sub", {"INPUT0": A, "INPUT1": B}, shared_memory=shared)
        np.testing.assert_array_equal(out["OUTPUT0"], A + B)
        np.testing.assert_array_equal(out["OUTPUT1"], A - B)
    assert not gpu_lab.client().get_cuda_shared_memory_status()  # every region unregistered


def test_helper_layer_gpu_memory_copied_in_cuda_builds_refused_in_cpu_builds(gpu_lab):
    pytest.importorskip(
        "cuda.bindings.runtime", reason="CUDA shared memory needs cuda-python: pip install 'labkit[gpu]'"
    )
    passthrough = labkit.native.reference_source("minimal").read_text()
    reference.serve(gpu_lab, ["minimal_nonbatching"])
    inputs = reference.sample_inputs("minimal_nonbatching")
    with pytest.raises(labkit.InferenceError) as info:  # inputs and outputs in GPU memory, a CPU build
        labkit.infer(gpu_lab, "minimal_nonbatching", inputs, shared_memory="cuda")
    assert type(info.value) is labkit.InferenceError and info.value.model == "minimal_nonbatching"
    gpu_lab.cpp_backend("minimal", passthrough, ["minimal_nonbatching"], cuda=True)
    out = labkit.infer(gpu_lab, "minimal_nonbatching", inputs, shared_memory="cuda")
    np.testing.assert_array_equal(out["OUT0"], inputs["IN0"])


def test_python_model_computes_with_cupy_through_dlpack(gpu_lab):
    pytest.importorskip("cupy", reason="the DLPack model needs cupy: pip install 'labkit[gpu]'")
    cfg = labkit.model_config("add_sub_dlpack", "python", kind="GPU", gpus=[0], parameters=examples.GPU_INPUTS, **SPECS)
    gpu_lab.python_model("add_sub_dlpack", examples.DLPACK_ADD_SUB.read_text(), cfg)
    assert labkit.check_add_sub(gpu_lab, model="add_sub_dlpack").ok
