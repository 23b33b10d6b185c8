"""CUDA builds for real on a machine without a GPU: nvcc and cudart from the CUDA 13.0 wheels
(``labkit setup --cuda``), a kernel backend compiled and linked, its config KIND_GPU on GPU 0. The
embedded Triton 23.12 loads it where a GPU is (the instance reports device 0 and the kernel answers);
without one, Triton refuses the KIND_GPU config itself, and a KIND_CPU config reaches the backend's
own TRITONBACKEND_ModelInstanceInitialize, which refuses any kind but KIND_GPU with its reason.
CPU builds are unchanged: no LABKIT_CUDA, no cudart."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import labkit
import labkit.errors
import labkit.server
from labkit.course import gpu_lesson as examples
from labkit.gpu import detect
from labkit.native import build_backend, cuda_kit
from labkit.plumbing import gpu_probe

SPECS = examples.SPECS
KERNEL = examples.CUDA_ADD_SUB.read_text()


@pytest.fixture(scope="module")
def kit():
    return cuda_kit.locate()  # downloads the wheels once where `labkit setup --cuda` did not


def test_nvcc_from_the_wheels_runs(kit):
    assert kit.nvcc.is_relative_to(cuda_kit.cache_dir()) and "release 13.0" in kit.version()
    assert kit.static_cudart.exists()


def test_kernel_backend_builds_with_static_cudart_and_a_fatbinary(kit, tmp_path):
    build = build_backend("cuda_add_sub", KERNEL, cuda=True, cache=tmp_path, progress=False, first_line=2)
    dynamic = subprocess.run(["readelf", "-d", str(build.library)], capture_output=True, text=True).stdout
    sections = subprocess.run(["readelf", "-S", str(build.library)], capture_output=True, text=True).stdout
    assert "libcudart" not in dynamic and "tritonserver" not in dynamic  # cudart linked in, Triton resolved at load
    assert ".nv_fatbin" in sections  # device code for the GPU architecture
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(build.library)], capture_output=True, text=True).stdout
    entry_points = (
        "TRITONBACKEND_ModelInstanceInitialize",
        "TRITONBACKEND_ModelInstanceFinalize",
        "TRITONBACKEND_ModelInstanceExecute",
    )
    assert all(f" {name}\n" in symbols for name in entry_points)
    assert "cudaMalloc" not in symbols and "cudaSetDevice" not in symbols  # only entry points exported
    again = build_backend("cuda_add_sub", KERNEL, cuda=True, cache=tmp_path, progress=False, first_line=2)
    cpu = build_backend(
        "cuda_add_sub", labkit.native.reference_source("minimal").read_text(), cache=tmp_path, progress=False
    )
    assert again.cached and again.library == build.library and cpu.digest != build.digest


def test_kernel_config_is_one_kind_gpu_instance_on_gpu_0():
    config = examples.cuda_add_sub_config()
    group = config.instance_group
    assert len(group) == 1 and group[0].kind == group[0].KIND_GPU and group[0].count == 1 and list(group[0].gpus) == [0]
    assert "kind: KIND_GPU" in str(config) and "gpus: 0" in str(config) and config.backend == "cuda_add_sub"
    two = examples.cuda_add_sub_config("cuda_add_sub_two", gpus=[0, 1])
    assert list(two.instance_group[0].gpus) == [0, 1] and two.name == "cuda_add_sub_two"  # one instance per GPU listed


def test_cuda_compile_error_names_the_cells_line(kit, tmp_path):
    broken = KERNEL.replace("sum[i] = a[i] + b[i];", "sum[i] = a[i] + undeclared[i];")
    line = (
        broken.splitlines().index(next(text for text in broken.splitlines() if "undeclared" in text)) + 2
    )  # under the magic line
    with pytest.raises(labkit.BuildError) as info:
        build_backend("cuda_broken", broken, cuda=True, cache=tmp_path, progress=False, first_line=2)
    assert "undeclared" in info.value.compiler_output and f"({line})" in info.value.compiler_output
    assert info.value.backend == "cuda_broken" and not list(tmp_path.glob("cuda_broken/*/*.so"))


def test_cuda_sources_and_header_need_a_cuda_build(tmp_path):
    kernel = tmp_path / "kernels.cu"
    kernel.write_text(KERNEL)
    with pytest.raises(labkit.BuildError) as info:
        build_backend("needs_cuda", [kernel], cache=tmp_path / "cache", progress=False)
    assert info.value.backend == "needs_cuda" and info.value.compiler_output == ""
    with pytest.raises(labkit.BuildError) as info:  # a CPU build: labkit/cuda.hpp stops at its #error
        build_backend("needs_cuda", KERNEL, cache=tmp_path / "cache", progress=False)
    assert "labkit/cuda.hpp needs a CUDA build" in info.value.compiler_output


def test_cu_file_builds_and_is_staged(kit, tmp_path):
    kernel = tmp_path / "add_sub_kernels.cu"
    kernel.write_text(KERNEL)
    build = build_backend("cuda_files", [kernel], cuda=True, cache=tmp_path / "cache", progress=False)
    assert build.library.exists() and (build.library.parent / "src" / "add_sub_kernels.cu").exists()


def test_triton_loads_the_kernel_backend_on_kind_gpu_and_refuses_other_kinds(kit):
    with labkit.server.EmbeddedServer() as lab:
        lab.start()
        cmdline = Path(f"/proc/{lab.runtime.triton_pid}/cmdline").read_text().split("\0")
        flag = f"--allow-gpu-metrics={'true' if detect.visible() else 'false'}"
        assert flag in cmdline  # the flag follows the machine
        lab.repository.write_config(examples.cuda_add_sub_config())
        lab.repository.write_config(labkit.model_config("cuda_add_sub_on_cpu", "cuda_add_sub", **SPECS))
        a, b = np.arange(4, dtype=np.float32), np.full(4, 2, np.float32)
        if detect.visible():
            mark = lab.logs.mark()
            assert lab.cpp_backend("cuda_add_sub", KERNEL, ["cuda_add_sub"], cuda=True, first_line=2) == {
                "cuda_add_sub": 1
            }
            out = labkit.infer(lab, "cuda_add_sub", {"INPUT0": a, "INPUT1": b})
            np.testing.assert_array_equal(out["OUTPUT0"], a + b)
            np.testing.assert_array_equal(out["OUTPUT1"], a - b)
            lab.logs.settle()
            assert re.search(r"instance cuda_add_sub_0\S*: KIND_GPU on device 0", lab.logs.since(mark))  # its device id
        else:  # Triton checks the config's gpus against the GPUs it sees, before the backend is asked
            with pytest.raises(labkit.ModelLoadError) as info:
                lab.cpp_backend("cuda_add_sub", KERNEL, ["cuda_add_sub"], cuda=True, first_line=2)
            assert "invalid or unsupported gpu id 0" in info.value.reason and info.value.model == "cuda_add_sub"
        # A KIND_CPU instance reaches the backend: its ModelInstanceInitialize asks Triton for the kind and refuses.
        with pytest.raises(labkit.ModelLoadError) as info:
            lab.cpp_backend("cuda_add_sub", KERNEL, ["cuda_add_sub_on_cpu"], cuda=True, first_line=2)
        assert "instance cuda_add_sub_on_cpu_0_0 is KIND_CPU" in info.value.reason and "KIND_GPU" in info.value.reason
        assert lab.alive  # a refused load leaves the server running
        if not detect.visible():  # CUDA shared memory: the clear labkit error, nothing left registered
            with pytest.raises(labkit.errors.GpuUnavailableError) as info:
                labkit.infer(lab, "cuda_add_sub", {"INPUT0": a, "INPUT1": b}, shared_memory="cuda")
            assert info.value.wanted == "CUDA shared memory"
        with pytest.raises(labkit.errors.ConfigError) as bad:
            labkit.infer(lab, "cuda_add_sub", {"INPUT0": a, "INPUT1": b}, shared_memory="system")
        assert bad.value.field == "shared_memory"
        with pytest.raises(labkit.errors.ConfigError) as bad:
            labkit.infer(lab, "cuda_add_sub", {"INPUT0": a, "INPUT1": b}, shared_memory="cuda", protocol="grpc")
        assert bad.value.field == "shared_memory"


def test_cuda_built_helpers_serve_cpu_memory_as_before(kit):
    """The helper layer compiled with LABKIT_CUDA reads and writes CPU tensors as a CPU build does
    (memcpy, no driver asked), so a CUDA build of a passthrough answers here."""
    with labkit.server.EmbeddedServer() as lab:
        lab.start()
        lab.repository.copy_model_from(labkit.course.reference.repository(), "minimal_nonbatching")
        passthrough = labkit.native.reference_source("minimal").read_text()
        lab.cpp_backend("minimal", passthrough, ["minimal_nonbatching"], cuda=True)
        inputs = labkit.course.reference.sample_inputs("minimal_nonbatching")
        out = labkit.infer(lab, "minimal_nonbatching", inputs)
        np.testing.assert_array_equal(out["OUT0"], inputs["IN0"])
        with pytest.raises(labkit.RequestError):  # a wrong request is still refused as before
            labkit.infer(lab, "minimal_nonbatching", {"IN0": inputs["IN0"].astype(np.float32)})


def test_cuda_shared_memory_fails_as_labkit_error_when_the_driver_is_missing(kit, monkeypatch):
    pytest.importorskip(
        "tritonclient.utils.cuda_shared_memory", reason="tritonclient's CUDA shared memory needs cuda-python"
    )
    if detect.visible():
        pytest.skip("a GPU is visible: the driver is there, this failure path cannot happen")
    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from(["nvidia0"], None))  # claim a GPU; none answers
    with labkit.server.EmbeddedServer() as lab:
        lab.start()
        labkit.course.reference.serve(lab, ["add_sub"])
        inputs = labkit.course.reference.sample_inputs("add_sub", server=lab)
        with pytest.raises(labkit.errors.GpuUnavailableError) as info:
            labkit.infer(lab, "add_sub", inputs, shared_memory="cuda")
        assert info.value.missing == "CUDA device" and info.value.wanted == "CUDA shared memory"
        status = lab.client().get_cuda_shared_memory_status()
        assert not status  # nothing left registered
        np.testing.assert_array_equal(
            labkit.infer(lab, "add_sub", inputs)["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"]
        )
