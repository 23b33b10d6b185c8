"""The Python backend's shared memory (issue 40, part 3) against a real Triton 23.12: python_backend's
options through --backend-config, each model instance's region in /dev/shm, and a Docker server whose
/dev/shm is smaller than a request told as SharedMemoryError (then the same request served)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import labkit
from labkit.errors import SharedMemoryError
from labkit.server.launchers.docker import DockerServer
from labkit.server.shm_regions import usage

PASS = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
"""
MIB = 2**20


def _config(instances: int = 1) -> labkit.repository.ModelConfig:
    return labkit.model_config(
        "big", backend="python", inputs=[("X", "FP32", [-1])], outputs=[("Y", "FP32", [-1])], instances=instances
    )


def test_backend_config_options_reach_triton_and_size_each_instances_region():
    with labkit.start(shm_default_byte_size=4 * MIB, shm_growth_byte_size=2 * MIB, stub_timeout_s=45) as lab:
        argv = Path(f"/proc/{lab.runtime.triton_pid}/cmdline").read_bytes().decode().split("\0")
        assert [a for a in argv if a.startswith("--backend-config=python,")] == [
            f"--backend-config=python,shm-region-prefix-name={lab.config.shm_prefix}",
            f"--backend-config=python,shm-default-byte-size={4 * MIB}",
            f"--backend-config=python,shm-growth-byte-size={2 * MIB}",
            "--backend-config=python,stub-timeout-seconds=45",
        ]
        lab.python_model("big", PASS, _config(instances=2))
        regions = usage(lab).regions
        assert [(r.instance, r.bytes) for r in regions] == [("big_0_0", 4 * MIB), ("big_0_1", 4 * MIB)]
        assert all(r.name.startswith(lab.config.shm_prefix) for r in regions)
        x = np.ones(3 * MIB // 4, np.float32)  # 3 MiB in, 3 MiB out: more than 4 MiB
        assert labkit.infer(lab, "big", {"X": x})["Y"].shape == x.shape
        grown = [r.bytes for r in usage(lab).regions]
        assert max(grown) > 4 * MIB and all((size - 4 * MIB) % (2 * MIB) == 0 for size in grown)  # in growth steps


def test_a_docker_shm_smaller_than_a_request_is_a_labkit_error_then_served_with_more(cpu_image):
    from docker_support import engine_client, gone

    x = np.ones(24 * MIB // 4, np.float32)
    with DockerServer(image=cpu_image, shm_size="16m") as small:
        small.start(timeout_s=120)
        small.python_model("big", PASS, _config())
        with pytest.raises(SharedMemoryError) as caught:
            labkit.infer(small, "big", {"X": x})
        error = caught.value
        assert (error.model, error.shm_size, error.needed_bytes) == ("big", "16m", x.nbytes)
        assert error.free_bytes < x.nbytes <= 16 * MIB + x.nbytes
        assert "shm_size='64m'" in error.remedy and "--shm-size" in error.reason  # Triton's words kept in reason
        assert small.loaded_models() == ["big"]  # the model keeps serving smaller requests
        assert labkit.infer(small, "big", {"X": x[:1024]})["Y"].shape == (1024,)
    assert gone(engine_client(), small.runtime.container.id)
    with DockerServer(image=cpu_image, shm_size="64m") as large:  # what the error suggests for this request
        large.start(timeout_s=120)
        large.python_model("big", PASS, _config())
        assert labkit.infer(large, "big", {"X": x})["Y"].shape == x.shape
    assert gone(engine_client(), large.runtime.container.id)
