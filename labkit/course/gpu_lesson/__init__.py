"""The GPU lesson's sources (notebooks/10_gpu.ipynb): a CUDA kernel backend and a cupy/DLPack model.

The course holds them (not labkit.gpu): the kernel includes labkit's helper layer (labkit.native's
``include/``), so it stands above both the GPU wing and the builds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...repository import ModelConfig

FOLDER = Path(__file__).resolve().parent
CUDA_ADD_SUB = FOLDER / "cuda_add_sub.cc"  # %%triton_cpp NAME --cuda: the kernel, on its KIND_GPU instance's device
DLPACK_ADD_SUB = FOLDER / "dlpack_add_sub.py"  # a Python model computing with cupy (GPU only)
#: The config parameter that lets a Python model on KIND_GPU get its inputs where Triton holds them.
GPU_INPUTS = {"FORCE_CPU_ONLY_INPUT_TENSORS": "no"}
#: add_sub's tensors: two FP32 [4] inputs, their sum and difference.
SPECS = dict(
    inputs=[("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])],
    outputs=[("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4])],
)


def cuda_add_sub_config(name: str = "cuda_add_sub", gpus: Sequence[int] = (0,)) -> ModelConfig:
    """The kernel backend's config: ``instance_group [{ kind: KIND_GPU, count: 1, gpus: [0] }]``. Triton
    makes one instance per GPU listed and tells each its device id; the backend refuses any other kind."""
    from ...repository import model_config

    return model_config(
        name, "cuda_add_sub", kind="GPU", gpus=list(gpus), inputs=SPECS["inputs"], outputs=SPECS["outputs"]
    )
