"""What the lab does when a GPU is needed: ``require`` for notebook cells (prints why it skips) and
``need`` for library calls (GpuUnavailableError). Whether one is visible is labkit.plumbing.gpu_probe's
(``/dev/nvidia*`` and ``nvidia-smi``, never CUDA), named here too: ``probe``, ``visible``, ``visible_from``.
"""

from __future__ import annotations

import importlib.util

from ..errors import GpuUnavailableError
from ..plumbing.gpu_probe import GpuStatus, probe, visible, visible_from

__all__ = ["GpuStatus", "need", "probe", "require", "visible", "visible_from"]


def require(what: str = "this cell", packages: tuple[str, ...] = ()) -> bool:
    """For a notebook cell that needs a GPU (and ``packages``, e.g. ``("cupy",)``): True when all are
    there; otherwise prints ``skipped: <what> needs ...`` with the reason and returns False::

        if labkit.gpu.require("KIND_GPU add_sub"):
            ...
    """
    status = probe()
    if not status.visible:
        print(f"skipped: {what} needs a GPU; {status.line()}")
        return False
    missing = [name for name in packages if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        print(f"skipped: {what} needs {', '.join(missing)} (`pip install 'labkit[gpu]'`)")
    return not missing


def need(what: str) -> GpuStatus:
    """The GPUs, or GpuUnavailableError naming ``what`` needed one (for library calls, not cells)."""
    status = probe()
    if not status.visible:
        raise GpuUnavailableError(
            remedy="Run it on a machine with an NVIDIA GPU and driver (`nvidia-smi -L` lists it), or leave the GPU option out",
            missing="GPU",
            reason=f"none is visible here ({status.why})",
            wanted=what,
        )
    return status
