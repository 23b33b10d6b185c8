"""Where a C++ backend is compiled: g++ on this machine, or (labkit.docker.compiler) inside the
container Triton runs in, so the library links the C++ runtime it will run with.

A build only ever talks to a Toolchain: it asks for the compiler's version (part of the cache key),
for paths as the compiler sees them, and runs the compiler and nm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path

from ..errors import SetupError
from ..plumbing import triton_dist

#: Compiler messages must read the same on every machine (notebooks compare them): no translations.
COMPILER_ENV = {"LC_ALL": "C", "LANG": "C"}


class Toolchain(ABC):
    """A compiler and the file system it sees."""

    #: Shown in progress lines, e.g. " in the container".
    label = ""

    @property
    @abstractmethod
    def cache_root(self) -> Path:
        """The host folder that holds this toolchain's builds (it must see it too)."""

    @abstractmethod
    def version(self) -> str:
        """The compiler's version line; part of the cache key."""

    def cache_key(self) -> bytes:
        """Anything else a build depends on (e.g. the container image)."""
        return b""

    def include(self, folder: Path) -> str:
        """A host include folder as the compiler sees it."""
        return str(folder)

    def path(self, host_path: Path) -> str:
        """A host path inside the build cache as the compiler sees it."""
        return str(host_path)

    def triton_headers(self) -> list[str]:
        """Include folders holding Triton's own r23.12 headers where the backend will run (Triton's
        image has them); empty where there are none."""
        return []

    def triton_library(self) -> str | None:
        """The Triton server library backends built here will call into, as the tools see it (its
        symbol table says which functions exist); None if it is not at hand."""
        return None

    @abstractmethod
    def run(self, argv: list[str], cwd: Path) -> tuple[int, str]:
        """Run a tool (``argv[0]`` "c++" means the compiler); its exit code and its output."""


def compiler() -> str:
    """The C++ compiler builds here use: $CXX, else g++ or c++ on PATH (SetupError when there is none)."""
    wanted = os.environ.get("CXX")
    cxx = shutil.which(wanted) if wanted else shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise SetupError(
            needed_by="A C++ build",
            missing=f"CXX={wanted!r}" if wanted else "a C++ compiler",
            reason="names no compiler found here" if wanted else "none found",
            remedy="install g++ (Debian: `apt-get install g++`) or set CXX to one",
        )
    return cxx


class LocalToolchain(Toolchain):
    """g++ (or $CXX) on this machine."""

    def __init__(self) -> None:
        self._cxx = compiler()
        self._version: str | None = None

    @property
    def cache_root(self) -> Path:
        return triton_dist.cache_dir() / "builds"

    def version(self) -> str:
        if self._version is None:
            out = subprocess.run([self._cxx, "--version"], capture_output=True, text=True).stdout
            self._version = out.splitlines()[0] if out else self._cxx
        return self._version

    def triton_library(self) -> str | None:
        # The embedded server's: the wheel renames libtritonserver.so (a hashed name).
        try:
            found = sorted(triton_dist.locate().lib_dir.glob("libtritonserver*.so*"))
        except SetupError:
            return None
        return str(found[0]) if found else None

    def run(self, argv: list[str], cwd: Path) -> tuple[int, str]:
        argv = [self._cxx if argv[0] == "c++" else argv[0], *argv[1:]]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env={**os.environ, **COMPILER_ENV})
        except OSError as exc:
            raise SetupError(
                missing=argv[0],
                reason="does not run",
                detail=str(exc),
                remedy="Install it (Debian: `apt-get install g++ binutils`)",
            ) from None
        return proc.returncode, proc.stderr + proc.stdout


def build_tool(name: str) -> str:
    """cmake or ninja from the PyPI packages (``pip install cmake ninja``), else one on PATH."""
    try:
        if name == "cmake":
            import cmake

            folder = cmake.CMAKE_BIN_DIR
        else:
            import ninja

            folder = ninja.BIN_DIR
        if (Path(folder) / name).exists():
            return str(Path(folder) / name)
    except (ImportError, AttributeError):
        pass
    found = shutil.which(name)
    if found is None:
        raise SetupError(
            missing=name,
            reason="not installed",
            remedy="`pip install cmake ninja` (or install them with your system's packages)",
        )
    return found
