"""What an execution environment holds, read without running it: its Python version, its numpy, the
top-level modules it can import. Works on the two forms python_backend 23.12 takes as
``EXECUTION_ENV_PATH``: a folder (a venv, a conda environment) and a packed ``.tar.gz`` (conda-pack's,
venv-pack's, or a plain tar of a venv), which Triton unpacks itself."""

from __future__ import annotations

import os
import re
import sys
import tarfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .stub_pythons import Version

_LIB = re.compile(r"lib/python(\d+)\.(\d+)/(?:site-packages/|lib-dynload/)?([^/]+)")
_DIST_INFO = re.compile(r"(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)\.(?:dist|egg)-info")
_EXTENSION = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_-]+)?\.so")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class EnvContents:
    """One environment as the stub would see it."""

    path: str
    packed: bool  # a .tar.gz (python_backend unpacks it at load) rather than a folder
    python: Version | None  # the Python of its lib/pythonX.Y, None if it has none
    numpy: str  # the numpy version installed in it ("" when none)
    modules: frozenset[str]  # top-level names it can import (its own packages, and the standard library)

    def has_module(self, name: str) -> bool:
        return name.split(".")[0] in self.modules


def _module_name(entry: str) -> str:
    """The importable name a site-packages entry (or a standard-library file) provides, "" for none."""
    if entry.endswith(".py"):
        entry = entry[:-3]
    elif extension := _EXTENSION.fullmatch(entry):
        entry = extension["name"]
    return entry if _MODULE.fullmatch(entry) else ""


def _summarise(path: Path, packed: bool, names: list[str]) -> EnvContents:
    python: Version | None = None
    numpy = ""
    modules: set[str] = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    for name in names:
        match = _LIB.match(name.removeprefix("./"))
        if not match:
            continue
        python = python or (int(match[1]), int(match[2]))
        entry = match[3]
        info = _DIST_INFO.fullmatch(entry)
        if info:
            if info["name"].lower() == "numpy":
                numpy = info["version"]
            continue
        if module := _module_name(entry):
            modules.add(module)
    return EnvContents(str(path), packed, python, numpy, frozenset(modules))


def _folder_names(folder: Path) -> list[str]:
    names = []
    for lib in sorted((folder / "lib").glob("python*")):
        for sub in ("", "site-packages", "lib-dynload"):
            where = lib / sub if sub else lib
            if where.is_dir():
                names += [f"lib/{lib.name}/{sub + '/' if sub else ''}{entry}" for entry in os.listdir(where)]
    return names


@lru_cache(maxsize=32)
def _packed(path: str, _mtime_ns: int, _size: int) -> EnvContents:
    # Every member is read: a .tar.gz has no index. Cached per file version (a 80 MB venv takes ~1 s).
    with tarfile.open(path, "r:*") as archive:
        names = [member.name for member in archive]
    return _summarise(Path(path), True, names)


def read_env(path: str | Path) -> EnvContents:
    """What the environment at ``path`` (a folder or a tar archive) holds. OSError if unreadable."""
    path = Path(path)
    if path.is_dir():
        return _summarise(path, False, _folder_names(path))
    stat = path.stat()
    return _packed(str(path.resolve()), stat.st_mtime_ns, stat.st_size)
