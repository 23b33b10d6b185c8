"""GPU in the lab: whether a GPU is visible (``visible``, ``probe``; Triton's GPU metrics follow it),
``require`` for notebook cells that need one (they print why they skip), CUDA shared memory for
requests (``shared_memory``) and the ``nv_gpu_*`` metrics (``metrics``). CUDA builds (nvcc and cudart)
are the builds' own: ``labkit.native.cuda_kit`` and ``labkit.native.cuda_build``.

    if labkit.gpu.require("KIND_GPU add_sub"):     # prints "skipped: ... no GPU visible (...)" otherwise
        lab.repository.write_config(labkit.model_config(..., kind="GPU", gpus=[0]))
"""

from .detect import GpuStatus, need, probe, require, visible, visible_from

__all__ = ["GpuStatus", "need", "probe", "require", "visible", "visible_from"]
