"""The GPU lesson's sources (notebooks/10_gpu.ipynb): a CUDA kernel backend and a cupy/DLPack model."""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
CUDA_ADD_SUB = FOLDER / "cuda_add_sub.cc"  # %%triton_cpp NAME --cuda: the kernel and labkit's helpers
DLPACK_ADD_SUB = FOLDER / "dlpack_add_sub.py"  # a Python model computing with cupy (GPU only)
#: The config parameter that lets a Python model on KIND_GPU get its inputs where Triton holds them.
GPU_INPUTS = {"FORCE_CPU_ONLY_INPUT_TENSORS": "no"}
