"""A backend's sources the way they come: C++ text (a notebook cell), a ``.cc``/``.cpp`` file, a list
of files, or a directory (every ``.cc``/``.cpp`` directly in it; its headers, at any depth, beside them).

A cell is compiled as ``<backend>.cc`` (so a crash or a compiler message shows the cell's lines). Files
are staged, with the headers found beside them, into the build folder's ``src/`` under their own
names, so a build never depends on files that may change after it, and a quoted ``#include "bls.h"``
finds its header as it would next to the original. A cell compiled with files may include their
headers too (``src/`` is on its include path).

A ``str`` is a path when it is one line that ends in a C++ suffix or names a directory; otherwise it
is C++ text. A ``Path`` is always a path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, SetupError

SOURCE_SUFFIXES = (".cc", ".cpp", ".cxx", ".cu")  # .cu: CUDA, compiled by nvcc in a CUDA build
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inc", ".inl", ".ipp", ".cuh")
STAGED = "src"  # the build folder's subfolder that holds staged files


@dataclass(frozen=True)
class Sources:
    """What one build compiles: ``cell`` (C++ text, "" if none) and ``files`` / ``headers`` as
    (name relative to ``src/``, text) pairs, in a stable order."""

    cell: str
    files: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]

    def texts(self) -> list[str]:
        """Every text in the build (cell, sources, headers): what the build's digest and its mode read."""
        return [self.cell, *(t for _, t in self.files), *(t for _, t in self.headers)]

    def digest_parts(self) -> list[bytes]:
        return [self.cell.encode()] + [f"{n}\0{t}".encode() for n, t in (*self.files, *self.headers)]

    def identity(self) -> str:
        """One string for the whole input (what ``attempts`` records a source by)."""
        if not self.files:
            return self.cell
        if not self.cell and len(self.files) == 1 and not self.headers:
            return self.files[0][1]
        return "\n".join([self.cell, *(f"// {n}\n{t}" for n, t in (*self.files, *self.headers))])


def is_path(item: str | Path) -> bool:
    if isinstance(item, Path):
        return True
    name = item.strip()
    return bool(name) and "\n" not in name and (name.endswith(SOURCE_SUFFIXES) or Path(name).is_dir())


def collect(source: str | Path | Iterable[str | Path], first_line: int = 1) -> Sources:
    """The sources ``source`` names (see the module's doc). ``first_line`` numbers a cell's first line."""
    items = [source] if isinstance(source, (str, Path)) else list(source)
    cells = [item for item in items if not is_path(item)]
    if len(cells) > 1:
        raise ConfigError(
            problem="a backend's sources hold at most one piece of C++ text",
            remedy="give the rest as paths of .cc/.cpp files or directories",
            field="source",
            value=f"{len(cells)} texts",
        )
    cell = str(cells[0]) if cells else ""
    if cell and first_line != 1:
        cell = f"#line {first_line}\n{cell}"
    files: dict[str, tuple[Path, str]] = {}
    headers: dict[str, str] = {}
    for item in items:
        if not is_path(item):
            continue
        path = Path(str(item).strip()).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SOURCE_SUFFIXES)
            if not found:
                cmake = (
                    (
                        " It holds a CMakeLists.txt: build that project as its repository does with "
                        "labkit.native.build_cmake (`labkit build-backend NAME FOLDER`)."
                    )
                    if (path / "CMakeLists.txt").is_file()
                    else ""
                )
                raise SetupError(
                    needed_by=f"A build of {path}",
                    missing=str(path / "*.cc"),
                    reason="no C++ sources",
                    remedy=(
                        "give the folder with the backend's sources" + cmake.replace(" It holds", "; it holds")
                    ).rstrip("."),
                )
            beside = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in HEADER_SUFFIXES)
            root = path
        elif path.is_file() or not path.exists():
            if not path.is_file():
                raise SetupError(
                    missing=str(path),
                    reason="no such file",
                    remedy="give C++ text, a .cc/.cpp file, a list of them, or a folder",
                )
            found = [path]
            beside = sorted(p for p in path.parent.iterdir() if p.is_file() and p.suffix in HEADER_SUFFIXES)
            root = path.parent
        for src in found:
            if src.name in files and files[src.name][0] != src.resolve():
                raise ConfigError(
                    problem=f"two sources have that name ({files[src.name][0]} and {src})",
                    remedy="a backend's files need different names",
                    field="source",
                    value=src.name,
                )
            files[src.name] = (src.resolve(), src.read_text())
        for header in beside:
            headers.setdefault(header.relative_to(root).as_posix(), header.read_text())
    return Sources(cell, tuple((n, t) for n, (_, t) in sorted(files.items())), tuple(sorted(headers.items())))


def stage(sources: Sources, folder: Path) -> list[Path]:
    """Write the files and headers into ``folder/src/``; the files to compile, in order."""
    for name, text in (*sources.files, *sources.headers):
        target = folder / STAGED / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return [folder / STAGED / name for name, _ in sources.files]
