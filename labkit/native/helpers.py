"""The helper layer (``src/*.cc``, declared in ``include/labkit/backend.hpp``) compiled once per
toolchain, flags and headers, and linked into every backend: a cell's compile then covers the cell
alone (the helpers and nlohmann-json's templates are most of the code generation).

The objects live in the toolchain's build cache under ``.helpers/<digest>/``; the digest covers the
sources, labkit's and Triton's headers, nlohmann-json, the compiler (and its container image) and
the flags, so any change builds them again.
"""

from __future__ import annotations

import hashlib
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from filelock import FileLock

from ..errors import BuildError
from .toolchain import Toolchain

SRC_DIR = Path(__file__).resolve().parent / "src"
INCLUDE_DIR = Path(__file__).resolve().parent / "include"

_KEEP = 8  # helper builds kept per toolchain (flag sets: optimized, debug, sanitizers, ...)
_digests: dict[tuple, str] = {}


def digest(parts: list[bytes]) -> str:
    """A hash of byte strings, each length-prefixed (so two lists never collide by concatenation)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def folder_digest(folder: Path) -> str:
    """A hash of every file below ``folder`` (names and contents; Python's caches aside); remembered
    until a file changes."""
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    key = (str(folder), tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files))
    if key not in _digests:
        _digests[key] = digest([p.relative_to(folder).as_posix().encode() + p.read_bytes() for p in files])
    return _digests[key]


def helper_objects(
    toolchain: Toolchain, flags: list[str], includes: list[Path], extra_includes: list[str]
) -> list[Path]:
    """The compiled helpers for these flags and include folders (host paths, compiled where the
    toolchain runs; ``extra_includes`` as the compiler sees them, searched first). Built on first use."""
    return compiled(
        toolchain,
        "helpers",
        sorted(SRC_DIR.glob("*.cc")),
        flags,
        includes,
        extra_includes,
        what="labkit's helper layer",
        owner="labkit",
    )


def compiled(
    toolchain: Toolchain,
    label: str,
    sources: list[Path],
    flags: list[str],
    includes: list[Path],
    extra_includes: list[str],
    *,
    what: str,
    owner: str,
    archive: str = "",
) -> list[Path]:
    """``sources`` (host paths) compiled once per toolchain, flags and headers into the build cache's
    ``.<label>/<digest>/``: their objects, or with ``archive`` the one static library of them (a link then
    takes only the objects it needs). ``what`` names them in a BuildError (with ``owner`` as its backend)."""
    key = digest(
        [
            label.encode(),
            " ".join(flags).encode(),
            toolchain.version().encode(),
            toolchain.cache_key(),
            " ".join(extra_includes).encode(),
            " ".join(s.name for s in sources).encode(),
            *(folder_digest(folder).encode() for folder in sorted({s.parent for s in sources})),
            *(folder_digest(folder).encode() for folder in includes),
        ]
    )
    folder = toolchain.cache_root / f".{label}" / key[:16]
    objects = [folder / f"{src.stem}.o" for src in sources]
    outputs = [folder / archive] if archive else objects
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.parent / f".{folder.name}.lock"):  # one compile of a key at a time, across processes
        if all(o.exists() for o in outputs):
            return outputs
        folder.mkdir(parents=True, exist_ok=True)
        include_args = [f"-I{p}" for p in [*extra_includes, *(toolchain.include(f) for f in includes)]]
        # folders as the compiler sees them, once (a container toolchain copies each: not from several threads)
        src_dirs = {folder: toolchain.include(folder) for folder in {src.parent for src in sources}}

        def compile_one(src: Path, obj: Path) -> tuple[int, str]:
            partial = obj.with_suffix(".o.partial")
            argv = [
                "c++",
                *flags,
                "-c",
                *include_args,
                f"{src_dirs[src.parent]}/{src.name}",
                "-o",
                toolchain.path(partial),
            ]
            code, messages = toolchain.run(argv, folder)
            if code == 0:
                partial.rename(obj)
            return code, messages

        with ThreadPoolExecutor(max_workers=min(len(sources), 8)) as pool:  # the TUs are independent
            results = list(pool.map(compile_one, sources, objects))
        failed = [(src.name, messages) for src, (code, messages) in zip(sources, results) if code != 0]
        if not failed and archive:
            partial = folder / f".{archive}.partial"
            code, messages = toolchain.run(
                ["ar", "rcs", toolchain.path(partial), *(toolchain.path(o) for o in objects)], folder
            )
            failed = [] if code == 0 else [(archive, messages)]
            if code == 0:
                partial.rename(folder / archive)
        if failed:
            shutil.rmtree(folder, ignore_errors=True)
            name, messages = failed[0]
            raise BuildError(
                problem=f"did not build: {what} ({name}) did not compile{toolchain.label} with these flags and headers",
                remedy="read the compiler messages below",
                backend=owner,
                compiler_output=messages,
            )
        prune(folder, _KEEP)
        return outputs


def prune(keep: Path, count: int) -> None:
    """Remove all but the ``count`` most recent build folders beside ``keep`` (which stays)."""
    builds = sorted((p for p in keep.parent.iterdir() if p.is_dir() and p != keep), key=lambda p: p.stat().st_mtime)
    for old in builds[: max(0, len(builds) - (count - 1))]:
        shutil.rmtree(old, ignore_errors=True)
