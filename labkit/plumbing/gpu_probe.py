"""Is a GPU visible to this machine, and which driver does it have? Read from ``/dev/nvidia*`` and
``nvidia-smi``, never from CUDA: a lab without a GPU must not need a CUDA library to ask.

``visible_from`` decides from what was seen (a pure function, unit-tested both ways); ``probe`` looks,
once per process. A fact about the machine, as ports are, so that any wing may ask it: Triton's GPU
metrics (``--allow-gpu-metrics``) and a CMake build's ``TRITON_ENABLE_GPU`` follow ``visible()``;
``labkit.gpu`` adds the lab's answers to "no GPU" (``require`` for cells, ``need`` for library calls).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: /dev entries a driver creates for each GPU (nvidia0, nvidia1, ...): control nodes are not GPUs.
_GPU_NODE = re.compile(r"^nvidia\d+$")
_SMI_GPU = re.compile(r"^GPU \d+: (.+?)(?: \(UUID: [^)]*\))?$")
_DRIVER = re.compile(r"Kernel Module\s+(\S+)|Driver Version:\s*(\S+)")


@dataclass(frozen=True)
class GpuStatus:
    """What was seen: ``gpus`` (names from ``nvidia-smi -L``, or the /dev nodes), ``driver`` (its
    version, "" if unknown) and ``why`` (how it was decided, shown in skip messages and doctor)."""

    gpus: tuple[str, ...]
    driver: str
    why: str

    @property
    def visible(self) -> bool:
        return bool(self.gpus)

    def line(self) -> str:
        if not self.visible:
            return f"no GPU visible ({self.why})"
        driver = f", driver {self.driver}" if self.driver else ""
        return f"{len(self.gpus)} GPU(s): {', '.join(self.gpus)}{driver}"


def visible_from(dev_names: list[str], smi_output: str | None, driver_text: str = "") -> GpuStatus:
    """Decide from a listing of ``/dev`` and the output of ``nvidia-smi -L`` (None: not installed or
    it failed). nvidia-smi's answer wins when there is one; else the /dev nodes decide."""
    driver = next((a or b for a, b in _DRIVER.findall(driver_text)), "")
    if smi_output is not None:
        names = tuple(m.group(1) for line in smi_output.splitlines() if (m := _SMI_GPU.match(line.strip())))
        return GpuStatus(names, driver, "nvidia-smi -L lists none" if not names else "nvidia-smi -L")
    nodes = tuple(sorted(n for n in dev_names if _GPU_NODE.match(n)))
    return GpuStatus(nodes, driver, "no /dev/nvidia0 and no nvidia-smi" if not nodes else "/dev/nvidia*")


def _smi(*args: str) -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        proc = subprocess.run([smi, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


_probed: GpuStatus | None = None


def probe(refresh: bool = False) -> GpuStatus:
    """This machine's GPUs (looked up once per process; ``refresh`` looks again)."""
    global _probed
    if _probed is None or refresh:
        dev = [p.name for p in Path("/dev").glob("nvidia*")]
        version = Path("/proc/driver/nvidia/version")
        driver = version.read_text() if version.exists() else (_smi() or "")
        _probed = visible_from(dev, _smi("-L"), driver)
    return _probed


def visible() -> bool:
    """Whether a GPU is visible here (what Triton's ``--allow-gpu-metrics`` and ``TRITON_ENABLE_GPU`` follow)."""
    return probe().visible
