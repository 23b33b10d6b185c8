"""Notebook 10's CUDA kernel backend, without a GPU or a server: the notebook builds the file the tests
build (labkit.course.gpu_lesson), its prose shows Triton's instance API before labkit's helpers, and the
kernel's config is one KIND_GPU instance on GPU 0."""

from __future__ import annotations

import json
from pathlib import Path

from labkit.course import gpu_lesson as examples

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "10_gpu.ipynb"


def _cells() -> list[tuple[str, str]]:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return [(c["cell_type"], "".join(c["source"])) for c in cells]


def test_the_notebooks_kernel_cell_is_the_example_the_tests_build():
    kernel = next(
        text for kind, text in _cells() if kind == "code" and text.startswith("%%triton_cpp cuda_add_sub --cuda")
    )
    assert kernel.split("\n", 1)[1].strip() == examples.CUDA_ADD_SUB.read_text().strip()


def test_prose_shows_tritons_instance_api_before_labkits_helpers_and_says_why_kind_gpu():
    prose = "\n".join(text for kind, text in _cells() if kind == "markdown")
    for call in ("TRITONBACKEND_ModelInstanceKind", "TRITONBACKEND_ModelInstanceDeviceId"):
        assert prose.index(call) < prose.index("labkit::instance_kind"), call
    assert "Why KIND_GPU matters" in prose and "for every GPU listed in `gpus`" in prose
    assert "cudaSetDevice(device_id)" in prose


def test_the_kernel_config_cell_asks_for_kind_gpu_on_gpu_0():
    code = "\n".join(text for kind, text in _cells() if kind == "code")
    assert 'labkit.model_config("cuda_add_sub", "cuda_add_sub", kind="GPU", gpus=[0], **specs)' in code
    group = examples.cuda_add_sub_config().instance_group[0]
    assert (group.kind, group.count, list(group.gpus)) == (group.KIND_GPU, 1, [0])


def test_the_backend_keeps_instance_state_and_sets_the_device_before_its_work():
    kernel = examples.CUDA_ADD_SUB.read_text()
    for entry in (
        "TRITONBACKEND_ModelInstanceInitialize(",
        "TRITONBACKEND_ModelInstanceFinalize(",
        "TRITONBACKEND_ModelInstanceExecute(",
    ):
        assert f"TRITONSERVER_Error* {entry}" in kernel, entry
    execute = kernel[kernel.index("TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(") :]
    assert execute.index("cudaSetDevice(mine.device_id)") < execute.index("DeviceBuffer") < execute.index("<<<")
    assert "TRITONSERVER_INSTANCEGROUPKIND_GPU" in kernel and "TRITONSERVER_ERROR_INVALID_ARG" in kernel
