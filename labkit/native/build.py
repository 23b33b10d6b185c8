"""Compile a C++ backend into libtriton_<name>.so, cached by content, checked before Triton sees it."""

from __future__ import annotations

import hashlib
import os
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

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
REFERENCE_DIR = Path(__file__).resolve().parent / "backends"
REQUIRED_ENTRY_POINT = "TRITONBACKEND_ModelInstanceExecute"
OFFICIAL_TAG = "r23.12"
OFFICIAL_REPO = "https://github.com/triton-inference-server/core"
_KEEP_BUILDS = 5  # per backend name; older ones are removed from the cache

CXXFLAGS = ["-std=c++17", "-O2", "-g0", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra"]


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


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise SetupError("No C++ compiler found; install g++ (Debian: `apt-get install g++`) or set CXX.")
    return cxx


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


def exported_symbols(library: Path) -> set[str]:
    proc = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"Could not read the symbols of {library}: {proc.stderr.strip()}")
    return {line.split()[-1] for line in proc.stdout.splitlines() if line.strip()}


def build_backend(
    backend: str,
    source: str | Path,
    *,
    headers: str | Path | None = None,
    extra_flags: list[str] | None = None,
    cache: Path | None = None,
    progress: bool = True,
) -> Build:
    """Compile ``source`` (C++ text or a .cc path) into ``libtriton_<backend>.so``.

    ``headers``: None for labkit's own declarations of the 23.12 C API, or "official" / an include
    folder for Triton's own headers. An unchanged input is not rebuilt. Compiler messages keep
    the source's own line numbers.
    """
    check_name(backend, "backend")
    text = Path(source).read_text() if isinstance(source, Path) else source
    api_include = INCLUDE_DIR if headers is None else official_headers(None if headers == "official" else headers)
    includes = [api_include, INCLUDE_DIR, _json_include()] if headers is not None else [INCLUDE_DIR, _json_include()]
    cxx = _compiler()
    flags = CXXFLAGS + list(extra_flags or [])
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    digest = _digest(
        [backend.encode(), text.encode(), " ".join(flags).encode(), "".join(version).encode()]
        + [b for inc in includes[:2] for b in _header_bytes(inc)]
    )
    root = cache or (_triton_dist.cache_dir() / "builds")
    folder = root / backend / digest[:16]
    library = folder / f"libtriton_{backend}.so"
    if library.exists():
        return Build(backend, library, digest, 0.0, True)
    folder.mkdir(parents=True, exist_ok=True)
    src = write_atomic(folder / f"{backend}.cc", text)
    partial = folder / f".libtriton_{backend}.so.partial"
    argv = [cxx, *flags, *(f"-I{p}" for p in includes), str(src), "-o", str(partial)]
    if progress:
        print(f"compiling backend {backend!r} ...", end="", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        if progress:
            print(" failed")
        shutil.rmtree(folder, ignore_errors=True)
        raise BuildError(
            f"Backend {backend!r} did not compile; nothing was loaded. Compiler messages "
            f"(line numbers are those of your source):\n{_tidy(proc.stderr, src, backend)}"
        )
    exports = exported_symbols(partial)
    if REQUIRED_ENTRY_POINT not in exports:
        shutil.rmtree(folder, ignore_errors=True)
        if progress:
            print(" refused")
        raise BuildError(
            f"Backend {backend!r} compiled but does not export {REQUIRED_ENTRY_POINT}, the one entry point "
            f"Triton requires; it was not loaded. Define it with extern \"C\" and TRITONBACKEND_ISPEC "
            f"(or include labkit/backend.hpp, which exports it)."
        )
    partial.rename(library)
    if progress:
        print(" done", flush=True)
    _prune(root / backend, keep=folder)
    return Build(backend, library, digest, seconds, False)


def _tidy(stderr: str, src: Path, backend: str) -> str:
    # Show the file as the user knows it, not the cache path.
    return re.sub(re.escape(str(src)), f"{backend}.cc", stderr).strip()


def _prune(folder: Path, keep: Path) -> None:
    builds = sorted((p for p in folder.iterdir() if p.is_dir() and p != keep), key=lambda p: p.stat().st_mtime)
    for old in builds[: max(0, len(builds) - (_KEEP_BUILDS - 1))]:
        shutil.rmtree(old, ignore_errors=True)


def reference_source(backend: str) -> Path:
    """The source of one of labkit's reference backends (minimal, recommended, custom)."""
    path = REFERENCE_DIR / check_name(backend, "backend") / f"{backend}.cc"
    if not path.exists():
        have = sorted(p.name for p in REFERENCE_DIR.iterdir()) if REFERENCE_DIR.exists() else []
        raise BuildError(f"No reference backend {backend!r}; there are: {', '.join(have)}.")
    return path


if __name__ == "__main__":  # python -m labkit.native.build NAME SOURCE
    print(build_backend(sys.argv[1], Path(sys.argv[2])))
