"""What a CUDA build (``build_backend(..., cuda=True)``, ``%%triton_cpp NAME --cuda``) changes in
labkit.native.build: the cell and ``.cu`` files compile with nvcc (``-x cu``), every other unit and the
helper layer with ``LABKIT_CUDA`` defined and CUDA's headers, and the library links cudart statically.
Kept here so that CPU builds read exactly as before."""

from __future__ import annotations

from pathlib import Path

from ..errors import BuildError, SetupError
from . import cuda_kit
from .cuda_kit import CudaKit
from .sources import Sources
from .toolchain import LocalToolchain, Toolchain, compiler


def kit_for(backend: str, sources: Sources, toolchain: Toolchain, cuda: bool) -> CudaKit | None:
    """The CUDA kit a build uses (None for a CPU build). A ``.cu`` file without ``cuda`` is refused:
    g++ would not understand it."""
    cu_files = [name for name, _ in sources.files if name.endswith(".cu")]
    if not cuda:
        if cu_files:
            raise BuildError(
                problem=f"has CUDA sources ({', '.join(cu_files)})",
                remedy=f"build it with `%%triton_cpp {backend} --cuda` (build_backend(..., cuda=True))",
                backend=backend,
            )
        return None
    if not isinstance(toolchain, LocalToolchain):
        raise SetupError(
            needed_by=f"A CUDA build of backend {backend!r} (compiled{toolchain.label})",
            missing="nvcc",
            reason="not in the container",
            remedy="CUDA builds compile on this machine only: build it for the embedded server (labkit.start())",
        )
    return cuda_kit.locate()


def host_flags(kit: CudaKit | None) -> list[str]:
    """g++'s extra flags in a CUDA build (the helper layer's too, so they get their own cached build)."""
    return ["-DLABKIT_CUDA=1", f"-isystem{kit.include}"] if kit else []


def key(kit: CudaKit | None, debug: bool) -> bytes:
    return b"" if kit is None else " ".join([kit.version(), *kit.compile_flags(debug)]).encode()


def by_nvcc(kit: CudaKit | None, unit: Path, folder: Path) -> bool:
    """Whether nvcc compiles ``unit``: in a CUDA build, the cell (directly in the build folder) and .cu files."""
    return kit is not None and (unit.suffix == ".cu" or unit.parent == folder)


def nvcc_argv(kit: CudaKit, debug: bool, includes: list[str], source: str, output: str) -> list[str]:
    return [
        str(kit.nvcc),
        "-ccbin",
        compiler(),
        *kit.compile_flags(debug),
        "-x",
        "cu",
        "-c",
        *includes,
        source,
        "-o",
        output,
    ]
