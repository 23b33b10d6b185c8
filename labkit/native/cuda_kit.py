"""nvcc and cudart for ``%%triton_cpp NAME --cuda``, from PyPI wheels unpacked once into labkit's cache
(``labkit setup --cuda``), never from a system path.

Why CUDA 13.0 and not 23.12's CUDA 12.3: no ``nvidia-cuda-nvcc-cu12`` wheel (12.0 to 12.9) carries the
``nvcc`` driver, ``cicc``, ``cudafe++``, ``fatbinary`` or ``nvlink``, only ``ptxas`` and libnvvm; the
CUDA 13 wheels (``nvidia-cuda-nvcc``, ``-crt``, ``nvidia-nvvm``, ``-runtime``, ``-cccl``) are the first
that compile a ``.cu`` file. A backend links cudart 13 statically, so the library needs nothing at
run time but the driver: it loads (and serves KIND_CPU models) without one, and its kernels need an
NVIDIA driver of the R580 series or newer. Triton 23.12 keeps its own cudart 12.3.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import SetupError
from ..plumbing.downloads import cache_dir, fill_once, make_executable, pip_download, say

RELEASE = "13.0"
#: (pip requirement, file pattern, size): one CUDA release, unpacked into one tree (nvidia/cu13/).
WHEELS = (
    ("nvidia-cuda-nvcc==13.0.88", "nvidia_cuda_nvcc-13.0.88-*.whl", "37 MB"),
    ("nvidia-nvvm==13.0.88", "nvidia_nvvm-13.0.88-*.whl", "62 MB"),
    ("nvidia-cuda-crt==13.0.88", "nvidia_cuda_crt-13.0.88-*.whl", "0.1 MB"),
    ("nvidia-cuda-runtime==13.0.96", "nvidia_cuda_runtime-13.0.96-*.whl", "2 MB"),
    ("nvidia-cuda-cccl==13.0.85", "nvidia_cuda_cccl-13.0.85-*.whl", "3 MB"),
)
#: The GPU architecture kernels are compiled for (H100: sm_90); LABKIT_CUDA_ARCH overrides it.
DEFAULT_ARCH = "sm_90"
_CACHED = f"cuda-{RELEASE}"


@dataclass(frozen=True)
class CudaKit:
    """The unpacked wheels: ``nvidia/cu13/{bin,include,lib,nvvm}`` under ``root``."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "nvidia" / "cu13"

    @property
    def nvcc(self) -> Path:
        return self.home / "bin" / "nvcc"

    @property
    def include(self) -> Path:
        return self.home / "include"

    @property
    def static_cudart(self) -> Path:
        return self.home / "lib" / "libcudart_static.a"

    def link_args(self) -> list[str]:
        """What a backend links for CUDA: cudart, statically, and what cudart itself needs."""
        return [str(self.static_cudart), "-lpthread", "-ldl", "-lrt"]

    def compile_flags(self, debug: bool) -> list[str]:
        """nvcc's flags for a backend's unit (the host side as build.CXXFLAGS has it)."""
        host = ["-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-g" if debug else "-g1"]
        return [
            "-std=c++17",
            f"-arch={arch()}",
            "-O0" if debug else "-O2",
            "-lineinfo",
            "-DLABKIT_CUDA=1",
            "-Xcompiler",
            ",".join(host),
        ]

    def version(self) -> str:
        """nvcc's release line, e.g. "Cuda compilation tools, release 13.0, V13.0.88"."""
        try:
            out = subprocess.run([str(self.nvcc), "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SetupError(
                missing=str(self.nvcc),
                reason="does not run",
                detail=str(exc),
                remedy=f"Remove {self.root} and run `labkit setup --cuda` again",
            ) from None
        lines = [line for line in out.stdout.splitlines() if "release" in line]
        if out.returncode != 0 or not lines:
            raise SetupError(
                missing=str(self.nvcc),
                reason="does not run",
                detail=(out.stderr or out.stdout).strip()[-600:],
                remedy=f"Remove {self.root} and run `labkit setup --cuda` again",
            )
        return lines[0].strip()


def arch() -> str:
    return os.environ.get("LABKIT_CUDA_ARCH") or DEFAULT_ARCH


def present() -> CudaKit | None:
    """The kit if ``labkit setup --cuda`` (or a CUDA build) unpacked it already; downloads nothing."""
    kit = CudaKit(cache_dir() / _CACHED)
    return kit if kit.nvcc.exists() else None


def locate() -> CudaKit:
    """The kit, downloaded (about 105 MB of wheels) and unpacked into the cache on first use."""
    found = present()
    if found is not None:
        return found
    say(f"setting up nvcc and cudart (CUDA {RELEASE}, from PyPI wheels) in {cache_dir() / _CACHED}, once ...")
    wheels = [
        pip_download(spec, pattern, size, "`labkit setup --cuda` fetches it; check the network, then try again.")
        for spec, pattern, size in WHEELS
    ]

    def unpack(partial: Path) -> None:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(partial)
        kit = CudaKit(partial)
        # zipfile drops permission bits; nvcc runs the tools beside it and cicc.
        for tool in [*(kit.home / "bin").iterdir(), *(kit.home / "nvvm" / "bin").iterdir()]:
            if tool.is_file():
                make_executable(tool)
        kit.version()

    kit = CudaKit(fill_once(cache_dir() / _CACHED, unpack))
    say(f"nvcc is ready: {kit.version()}.")
    return kit
