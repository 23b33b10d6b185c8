"""Find the real tritonserver 2.41.0 (release 23.12) shipped in the nvidia-pytriton 0.5.0 wheel."""

from __future__ import annotations

import importlib.metadata
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import SetupError
from .downloads import cache_dir, fill_once, make_executable, pip_download

__all__ = ["SERVER_VERSION", "STUB_PYTHONS", "WHEEL", "TritonDist", "cache_dir", "check_python", "locate", "present"]

WHEEL = "nvidia-pytriton==0.5.0"
SERVER_VERSION = "2.41.0"
_CACHED = "nvidia-pytriton-0.5.0"  # the unpacked wheel's folder in labkit's cache
#: The Pythons the wheel has a Python-backend stub for (python_backend_stubs/<major.minor>/).
STUB_PYTHONS = ((3, 8), (3, 9), (3, 10), (3, 11))


def check_python(version: tuple[int, int], executable: str = "python") -> None:
    """SetupError, before anything is downloaded or started, when Triton 23.12's Python backend has no
    stub for ``version`` (e.g. 3.12 on a GPU host's system Python): the models could never load."""
    if tuple(version[:2]) in STUB_PYTHONS:
        return
    have = ", ".join(f"{a}.{b}" for a, b in STUB_PYTHONS)
    raise SetupError(
        needed_by=f"Python {version[0]}.{version[1]} ({executable})",
        missing=f"Python backend stub for Python {version[0]}.{version[1]}",
        reason="not in the wheel",
        detail=f"Triton 23.12's Python backend has stubs for Python {have} only, so no Python model could load",
        remedy="Create the lab's environment with Python 3.11 (`python3.11 -m venv .venv`, or `uv venv --python 3.11` where no 3.11 is installed) and run labkit from it",
    )


@dataclass(frozen=True)
class TritonDist:
    """Paths inside an unpacked nvidia-pytriton wheel."""

    root: Path  # the folder holding pytriton/ and nvidia_pytriton.libs/

    @property
    def server_dir(self) -> Path:
        return self.root / "pytriton" / "tritonserver"

    @property
    def binary(self) -> Path:
        return self.server_dir / "bin" / "tritonserver"

    @property
    def lib_dir(self) -> Path:
        return self.root / "nvidia_pytriton.libs"

    @property
    def python_backend_dir(self) -> Path:
        return self.server_dir / "backends" / "python"

    def stub_for(self, version: tuple[int, int]) -> Path:
        stubs = self.server_dir / "python_backend_stubs"
        stub = stubs / f"{version[0]}.{version[1]}" / "triton_python_backend_stub"
        if not stub.exists():
            have = sorted(p.name for p in stubs.iterdir()) if stubs.exists() else []
            raise SetupError(
                needed_by=f"Python {version[0]}.{version[1]}",
                missing=f"Python backend stub for Python {version[0]}.{version[1]}",
                reason="not in the wheel",
                detail=f"Triton 23.12's Python backend has stubs for Python {', '.join(have)} only, so no Python model could load",
                remedy="Create the lab's environment with Python 3.11 (`python3.11 -m venv .venv`, or `uv venv --python 3.11` where no 3.11 is installed) and run labkit from it",
            )
        return stub


def _installed_root() -> Path | None:
    try:
        dist = importlib.metadata.distribution("nvidia-pytriton")
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != WHEEL.split("==")[1]:
        return None
    root = Path(str(dist.locate_file("")))
    return root if (root / "pytriton" / "tritonserver" / "bin" / "tritonserver").exists() else None


def _download_and_unpack(target: Path) -> Path:
    # Unpacking ourselves (not `pip install`) keeps pip from resolving the wheel's pyzmq~=23 pin.
    wheel = pip_download(
        WHEEL,
        "nvidia_pytriton-0.5.0-*.whl",
        "about 40 MB",
        f"Install it yourself with `pip install --no-deps {WHEEL}`.",
    )

    def unpack(partial: Path) -> None:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(partial)
        # zipfile drops permission bits; the server and the stubs must be executable.
        make_executable(partial / "pytriton" / "tritonserver" / "bin" / "tritonserver")
        for stub in (partial / "pytriton" / "tritonserver" / "python_backend_stubs").glob(
            "*/triton_python_backend_stub"
        ):
            make_executable(stub)

    return fill_once(target, unpack)


def present() -> tuple[TritonDist, str] | None:
    """The Triton files already on this machine and where they are ("installed wheel" or "labkit's
    cache"), or None. Downloads nothing."""
    root = _installed_root()
    if root is not None:
        return TritonDist(root), "installed wheel"
    cached = cache_dir() / _CACHED
    return (TritonDist(cached), "labkit's cache") if cached.exists() else None


def locate() -> TritonDist:
    """The Triton files: the installed wheel if present, else a cached unpacked copy (downloaded once)."""
    found = present()
    return found[0] if found is not None else TritonDist(_download_and_unpack(cache_dir() / _CACHED))
