"""Compile a C++ backend into libtriton_<name>.so, cached by content, checked before Triton sees it."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import _triton_dist
from ..errors import BuildError, SetupError
from ..repository.files import write_atomic
from ..repository.names import check_name
from .toolchain import LocalToolchain, Toolchain

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
REFERENCE_DIR = Path(__file__).resolve().parent / "backends"
REQUIRED_ENTRY_POINT = "TRITONBACKEND_ModelInstanceExecute"
OFFICIAL_TAG = "r23.12"
OFFICIAL_REPO = "https://github.com/triton-inference-server/core"
_KEEP_BUILDS = 5  # per backend name; older ones are removed from the cache

# -g1: line tables only, so the live stack of a stuck backend thread names the cell's lines.
CXXFLAGS = ["-std=c++17", "-O2", "-g1", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra"]


@dataclass(frozen=True)
class Build:
    """A compiled backend library in the build cache."""

    backend: str
    library: Path
    digest: str
    seconds: float
    cached: bool

    def __repr__(self) -> str:
        return f"<Build {self.library.name} {self.digest[:12]}>"


def _json_include() -> Path:
    try:
        import nlohmann_json
    except ImportError:
        raise SetupError("The nlohmann-json headers are missing; `pip install nlohmann-json`.") from None
    return Path(nlohmann_json.__file__).resolve().parent / "include"


def official_headers(include_dir: str | Path | None = None) -> Path:
    """Triton's own r23.12 headers: ``include_dir`` (e.g. the NGC image's /opt/tritonserver/include),
    else a shallow clone of triton-inference-server/core at r23.12 into the cache (needs network)."""
    if include_dir is not None:
        path = Path(include_dir)
        if not (path / "triton" / "core" / "tritonbackend.h").exists():
            raise SetupError(f"{path} holds no triton/core/tritonbackend.h; give the folder that contains triton/.")
        return path
    target = _triton_dist.cache_dir() / f"triton-core-{OFFICIAL_TAG}"
    if not (target / "include" / "triton" / "core" / "tritonbackend.h").exists():
        git = shutil.which("git")
        if git is None:
            raise SetupError("Fetching the official headers needs git; install it or pass include_dir=.")
        shutil.rmtree(target, ignore_errors=True)
        proc = subprocess.run(
            [git, "clone", "--quiet", "--depth", "1", "--branch", OFFICIAL_TAG, OFFICIAL_REPO, str(target)],
            capture_output=True, text=True, timeout=300,
        )
        if proc.returncode != 0:
            raise SetupError(
                f"Could not fetch {OFFICIAL_REPO} at {OFFICIAL_TAG}: {proc.stderr.strip()[-400:]}\n"
                f"Offline, build with labkit's own declarations (the default) or pass include_dir=."
            )
    return target / "include"


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _header_bytes(folder: Path) -> list[bytes]:
    return [p.relative_to(folder).as_posix().encode() + p.read_bytes() for p in sorted(folder.rglob("*.h*"))]


def header_digest(folder: Path) -> str:
    """A hash of every header below ``folder`` (names and contents)."""
    return _digest(_header_bytes(folder))


def exported_symbols(library: Path, toolchain: Toolchain | None = None) -> set[str]:
    toolchain = toolchain or LocalToolchain()
    code, out = toolchain.run(["nm", "-D", "--defined-only", toolchain.path(library)], library.parent)
    if code != 0:
        raise BuildError(f"Could not read the symbols of {library}: {out.strip()}", backend=library.parent.parent.name)
    return {line.split()[-1] for line in out.splitlines() if line.strip() and len(line.split()) >= 2}


def build_backend(
    backend: str,
    source: str | Path,
    *,
    headers: str | Path | None = None,
    extra_flags: list[str] | None = None,
    cache: Path | None = None,
    progress: bool = True,
    toolchain: Toolchain | None = None,
    extra_includes: list[str] | None = None,
    required: tuple[str, ...] = (REQUIRED_ENTRY_POINT,),
) -> Build:
    """Compile ``source`` (C++ text or a .cc path) into ``libtriton_<backend>.so``.

    ``headers``: None for labkit's own declarations of the 23.12 C API; "official" or an include
    folder for Triton's own headers; "image" for those of the image the toolchain compiles in
    (NGC's ``/opt/tritonserver/include``). An unchanged input is not rebuilt. Compiler messages keep
    the source's own line numbers. ``toolchain`` is where to compile (a server's ``toolchain()``;
    default g++ here); ``extra_includes`` are include folders as that compiler sees them, searched first.
    ``required``: entry points the library must export (a batching-strategy library has no
    ModelInstanceExecute; it passes the five TRITONBACKEND_ModelBatch* names instead).
    """
    check_name(backend, "backend")
    text = Path(source).read_text() if isinstance(source, Path) else source
    toolchain = toolchain or LocalToolchain()
    extra_includes = list(extra_includes or [])
    if headers == "image":
        image_headers = toolchain.triton_headers()
        if not image_headers:
            raise SetupError(
                f"headers='image' takes Triton's headers from the container image, but backend {backend!r} is "
                f"compiled{toolchain.label or ' on this machine'}, where there is none; use headers='official' or a folder."
            )
        extra_includes, headers = image_headers + extra_includes, None
    api = [] if headers is None else [official_headers(None if headers == "official" else headers)]
    host_includes = [*api, INCLUDE_DIR, _json_include()]
    flags = CXXFLAGS + list(extra_flags or [])
    digest = _digest(
        [backend.encode(), text.encode(), " ".join(flags).encode(), toolchain.version().encode(),
         toolchain.cache_key(), " ".join(extra_includes or []).encode()]
        + [b for inc in host_includes[:-1] for b in _header_bytes(inc)]  # nlohmann's version is pinned by pip
        # a cached library was checked against its own list; the default adds nothing (old keys stay valid)
        + ([] if required == (REQUIRED_ENTRY_POINT,) else [" ".join(required).encode()])
    )
    root = cache or toolchain.cache_root
    folder = root / backend / digest[:16]
    library = folder / f"libtriton_{backend}.so"
    if progress:  # the same line whether or not the cache answers, so notebook outputs stay stable
        print(f"building backend {backend!r}{toolchain.label} ...", end="", flush=True)
    if library.exists():
        if progress:
            print(" done", flush=True)
        return Build(backend, library, digest, 0.0, True)
    folder.mkdir(parents=True, exist_ok=True)
    src = write_atomic(folder / f"{backend}.cc", text)
    partial = folder / f".libtriton_{backend}.so.partial"
    includes = [*(extra_includes or []), *(toolchain.include(p) for p in host_includes)]
    argv = ["c++", *flags, *(f"-I{p}" for p in includes), toolchain.path(src), "-o", toolchain.path(partial)]
    t0 = time.perf_counter()
    code, messages = toolchain.run(argv, folder)
    seconds = time.perf_counter() - t0
    try:
        if code != 0:
            output = _tidy(messages, toolchain.path(src), backend)
            raise BuildError(
                f"Backend {backend!r} did not compile{toolchain.label}; nothing was loaded. Compiler messages "
                f"(line numbers are those of your source):\n{output}",
                backend=backend, compiler_output=output,
            )
        exported = exported_symbols(partial, toolchain) if required else set()
        missing = [name for name in required if name not in exported]
        if missing:
            why = ", the one entry point Triton requires" if missing == [REQUIRED_ENTRY_POINT] else ""
            raise BuildError(
                f"Backend {backend!r} compiled but does not export {', '.join(missing)}{why}; it was not loaded. "
                f"Define it in your source, with \"labkit/backend.hpp\" "
                f"included (it declares the entry points exported) or marked LABKIT_EXPORT.",
                backend=backend,
            )
    except BuildError:
        if progress:
            print(" failed")
        shutil.rmtree(folder, ignore_errors=True)
        raise
    partial.rename(library)
    if progress:
        print(" done", flush=True)
    _prune(root / backend, keep=folder)
    return Build(backend, library, digest, seconds, False)


def _tidy(messages: str, src: str, backend: str) -> str:
    # Show the file as the user knows it, not the cache path.
    return re.sub(re.escape(src), f"{backend}.cc", messages).strip()


def _prune(folder: Path, keep: Path) -> None:
    builds = sorted((p for p in folder.iterdir() if p.is_dir() and p != keep), key=lambda p: p.stat().st_mtime)
    for old in builds[: max(0, len(builds) - (_KEEP_BUILDS - 1))]:
        shutil.rmtree(old, ignore_errors=True)


def reference_source(backend: str) -> Path:
    """The source of one of labkit's reference backends (minimal, recommended, custom)."""
    path = REFERENCE_DIR / check_name(backend, "backend") / f"{backend}.cc"
    if not path.exists():
        have = sorted(p.name for p in REFERENCE_DIR.iterdir()) if REFERENCE_DIR.exists() else []
        raise BuildError(f"No reference backend {backend!r}; there are: {', '.join(have)}.", backend=backend)
    return path


if __name__ == "__main__":  # python -m labkit.native.build NAME SOURCE
    print(build_backend(sys.argv[1], Path(sys.argv[2])))
