"""The CPU side of GPU support, as pure functions: whether a GPU is visible (both ways), Triton's
``--allow-gpu-metrics`` following it, GPU instance groups, the stub check for the running Python,
notebook skips and the nv_gpu_* metrics."""

from __future__ import annotations

import pytest

import labkit
import labkit.errors
import labkit.repository
import labkit.server
from labkit.plumbing import gpu_probe, triton_dist
from labkit.repository.config import to_text
from labkit.server.server_config import ServerConfig, TritonPlace, argv

SMI_TWO = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-9f8e7d6c-0000-1111-2222-333344445555)\n"
)
DRIVER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 30 2025\nGCC version:  gcc 12\n"


def test_nvidia_smi_listing_gpus_means_visible_with_names_and_driver():
    status = gpu_probe.visible_from(["nvidiactl", "nvidia0", "nvidia1", "nvidia-uvm"], SMI_TWO, DRIVER)
    assert status.visible and status.gpus == ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert status.driver == "580.95.05" and status.why == "nvidia-smi -L"
    assert "2 GPU(s)" in status.line() and "580.95.05" in status.line()


def test_no_nodes_and_no_smi_means_not_visible():
    status = gpu_probe.visible_from(["null", "shm", "nvidiactl", "nvidia-uvm", "nvidia-modeset"], None)
    assert not status.visible and status.gpus == () and status.driver == ""
    assert status.why == "no /dev/nvidia0 and no nvidia-smi"


def test_gpu_nodes_decide_without_smi_and_smi_overrules_nodes():
    assert gpu_probe.visible_from(["nvidiactl", "nvidia0"], None).gpus == ("nvidia0",)
    empty = gpu_probe.visible_from(["nvidia0"], "No devices were found\n")  # a driver, no usable GPU
    assert not empty.visible and empty.why == "nvidia-smi -L lists none"
    assert gpu_probe.visible_from([], "", "Driver Version: 550.54.15").driver == "550.54.15"


def _place(gpu: bool) -> TritonPlace:
    return TritonPlace("/r", "/b", "127.0.0.1", 1, 2, 3, gpu_metrics=gpu)


@pytest.mark.parametrize("gpu, flag", [(True, "--allow-gpu-metrics=true"), (False, "--allow-gpu-metrics=false")])
def test_gpu_metrics_flag_follows_the_machine(gpu, flag):
    status = gpu_probe.visible_from(["nvidia0"] if gpu else [], SMI_TWO if gpu else None)
    rendered = argv(ServerConfig(shm_prefix="p_"), _place(status.visible))
    assert flag in rendered and sum(a.startswith("--allow-gpu-metrics") for a in rendered) == 1


def test_gpu_instance_group_pinned_to_devices():
    cfg = labkit.model_config(
        "m", "python", [("IN", "FP32", [4])], [("OUT", "FP32", [4])], kind="GPU", gpus=[0], instances=2
    )
    group = cfg.instance_group[0]
    assert group.kind == group.KIND_GPU and list(group.gpus) == [0] and group.count == 2
    assert "kind: KIND_GPU" in to_text(cfg) and "gpus: 0" in to_text(cfg)
    two = labkit.model_config("m", "python", [("IN", "FP32", [4])], [("OUT", "FP32", [4])], kind="gpu", gpus=(0, 1))
    assert list(two.instance_group[0].gpus) == [0, 1]
    plain = labkit.model_config("m", "python", [("IN", "FP32", [4])], [("OUT", "FP32", [4])], kind="GPU")
    assert list(plain.instance_group[0].gpus) == [] and "gpus" not in to_text(plain)


@pytest.mark.parametrize("kind, gpus", [("CPU", [0]), ("GPU", []), ("GPU", [-1]), ("GPU", ["0"]), ("GPU", [True])])
def test_gpus_refused_unless_device_numbers_of_a_gpu_group(kind, gpus):
    with pytest.raises(labkit.errors.ConfigError) as info:
        labkit.model_config("m", "python", [("IN", "FP32", [4])], [("OUT", "FP32", [4])], kind=kind, gpus=gpus)
    assert info.value.field == "gpus" and info.value.value == gpus


@pytest.mark.parametrize("version", [(3, 8), (3, 9), (3, 10), (3, 11)])
def test_pythons_with_a_stub_pass(version):
    triton_dist.check_python(version)


@pytest.mark.parametrize("version", [(3, 12), (3, 13), (3, 7)])
def test_pythons_without_a_stub_fail_early_naming_the_version(version):
    with pytest.raises(labkit.errors.SetupError) as info:
        triton_dist.check_python(version, "/usr/bin/python3")
    assert info.value.missing == f"Python backend stub for Python {version[0]}.{version[1]}"
    assert info.value.reason == "not in the wheel"


def test_require_prints_the_skip_reason_or_says_go(monkeypatch, capsys):
    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from([], None))
    assert labkit.gpu.require("KIND_GPU add_sub") is False
    assert capsys.readouterr().out == (
        "skipped: KIND_GPU add_sub needs a GPU; no GPU visible (no /dev/nvidia0 and no nvidia-smi)\n"
    )
    with pytest.raises(labkit.errors.GpuUnavailableError) as info:
        labkit.gpu.need("CUDA shared memory")
    assert info.value.wanted == "CUDA shared memory" and info.value.missing == "GPU"
    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from(["nvidia0"], SMI_TWO))
    assert labkit.gpu.require("KIND_GPU add_sub") is True and capsys.readouterr().out == ""
    assert labkit.gpu.need("CUDA shared memory").visible


GPU_METRICS = """# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-bbb"} 0.25
nv_gpu_utilization{gpu_uuid="GPU-aaa"} 0.87
# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-aaa"} 85899345920
nv_gpu_memory_total_bytes{gpu_uuid="GPU-bbb"} 85899345920
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-aaa"} 1288490188.8
nv_gpu_memory_used_bytes{gpu_uuid="GPU-bbb"} 536870912
# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="add_sub",version="1"} 12
"""


def test_gpu_metrics_read_per_gpu_and_absent_without_a_gpu():
    from labkit.gpu import metrics
    from labkit.observe.stats import parse_metrics

    gpus = metrics.usage(parse_metrics(GPU_METRICS))
    assert [g.uuid for g in gpus] == ["GPU-aaa", "GPU-bbb"]
    assert gpus[0].utilization == pytest.approx(0.87) and gpus[1].memory_used == 536870912
    assert metrics.summary(gpus) == "GPU 0: 87% busy, 1.2/80.0 GiB; GPU 1: 25% busy, 0.5/80.0 GiB"
    cpu_only = GPU_METRICS.split("# HELP nv_inference_count")[1]
    assert metrics.usage(parse_metrics("# HELP nv_inference_count" + cpu_only)) == []
    assert metrics.summary([]) == ""


def test_cuda_shared_memory_refused_clearly_without_a_gpu(monkeypatch):
    from labkit.gpu import shared_memory

    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from([], None))
    with pytest.raises(labkit.errors.GpuUnavailableError) as info:
        shared_memory.infer(None, "add_sub", {}, None, lambda exc, sent: exc)
    assert info.value.wanted == "CUDA shared memory" and info.value.missing == "GPU"


def _config(max_batch_size=0, outputs=(("OUT", "TYPE_FP32", ["4"]),)):
    return {
        "name": "m",
        "max_batch_size": max_batch_size,
        "output": [{"name": n, "data_type": t, "dims": d} for n, t, d in outputs],
    }


def test_cuda_shared_memory_regions_sized_from_the_config():
    import numpy as np

    from labkit.gpu.shared_memory import output_shapes

    rows = {"IN": np.zeros((3, 4), np.float32)}
    assert output_shapes(_config(), rows, None) == {"OUT": ((4,), np.float32)}
    assert output_shapes(_config(max_batch_size=8), rows, None) == {"OUT": ((3, 4), np.float32)}
    two = _config(outputs=(("A", "TYPE_INT32", ["2", "2"]), ("B", "TYPE_FP16", ["1"])))
    assert output_shapes(two, rows, ["B"]) == {"B": ((1,), np.float16)}


@pytest.mark.parametrize("output", [("OUT", "TYPE_FP32", ["-1"]), ("OUT", "TYPE_STRING", ["4"])])
def test_cuda_shared_memory_refuses_outputs_of_unknown_size(output):
    import numpy as np

    from labkit.gpu.shared_memory import output_shapes

    with pytest.raises(labkit.errors.ConfigError) as info:
        output_shapes(_config(outputs=(output,)), {"IN": np.zeros(4, np.float32)}, None)
    assert info.value.field == "output" and info.value.value == "OUT" and info.value.source == "m"


def test_gpu_lesson_sources_are_valid_python_and_cuda_cpp_text():
    from labkit.course import gpu_lesson as examples

    compile(examples.DLPACK_ADD_SUB.read_text(), str(examples.DLPACK_ADD_SUB), "exec")
    kernel = examples.CUDA_ADD_SUB.read_text()
    assert '#include "labkit/cuda.hpp"' in kernel and "__global__" in kernel
    assert examples.GPU_INPUTS == {"FORCE_CPU_ONLY_INPUT_TENSORS": "no"}


def test_doctor_has_an_optional_gpu_line_both_ways(monkeypatch):
    from labkit.cli import doctor

    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from([], None))
    none = doctor._gpu()
    assert not none.ok and not none.required and none.line().startswith("[--  ] GPU: no GPU visible")
    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from(["nvidia0"], SMI_TWO, DRIVER))
    two = doctor._gpu()
    assert (
        two.ok and two.line() == "[ok  ] GPU: 2 GPU(s): NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3, driver 580.95.05"
    )


def test_require_names_a_missing_package_once_a_gpu_is_there(monkeypatch, capsys):
    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from(["nvidia0"], None))
    assert labkit.gpu.require("the DLPack model", packages=("no_such_package_xyz",)) is False
    assert (
        capsys.readouterr().out == "skipped: the DLPack model needs no_such_package_xyz (`pip install 'labkit[gpu]'`)\n"
    )
    assert labkit.gpu.require("numpy math", packages=("numpy",)) is True
    monkeypatch.setattr(gpu_probe, "_probed", gpu_probe.visible_from([], None))
    assert labkit.gpu.require("the DLPack model", packages=("numpy",)) is False
    assert "needs a GPU" in capsys.readouterr().out
