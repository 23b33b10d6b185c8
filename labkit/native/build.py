"""Compile a C++ backend into libtriton_<name>.so, cached by content, checked before Triton sees it.

The cell is the only translation unit compiled per edit: the helper layer is prebuilt per toolchain
(labkit.native.helpers) and linked in. A source that includes Triton's own ``triton/backend/`` or
``triton/common/`` headers builds in official mode instead (labkit.native.official): Triton's r23.12
include folders and its backend utilities, prebuilt the same way (with labkit's helper layer too, compiled
against Triton's headers, when the source also includes ``labkit/``). A check link with ``--no-undefined``
against the server library turns a call to a function nothing defines into a BuildError at build time. The library carries line tables (``-g1``) so a crash can be
shown at the cell's line (labkit.native.symbols), exports only the TRITONBACKEND_* entry points
(a linker version script), and may call only functions Triton 23.12 has (checked against the
server library's own symbol table).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..errors import BuildError, SetupError
from ..repository.files import write_atomic
from ..repository.names import check_name
from . import cuda_build, defines as defines_, official, triton_sources
from .diagnostics import compile_error
from .helpers import INCLUDE_DIR, SRC_DIR, digest, folder_digest, helper_objects, prune
from .sources import STAGED, Sources, collect, stage
from .toolchain import LocalToolchain, Toolchain

REFERENCE_DIR = Path(__file__).resolve().parent / "backends"
REQUIRED_ENTRY_POINT = "TRITONBACKEND_ModelInstanceExecute"
#: A batching-strategy library (loaded from a model's TRITON_BATCH_STRATEGY_PATH) exports these five
#: instead: Triton uses the strategy only if it finds them all.
BATCH_ENTRY_POINTS = (
    "TRITONBACKEND_ModelBatcherInitialize",
    "TRITONBACKEND_ModelBatcherFinalize",
    "TRITONBACKEND_ModelBatchInitialize",
    "TRITONBACKEND_ModelBatchIncludeRequest",
    "TRITONBACKEND_ModelBatchFinalize",
)
_KEEP_BUILDS = 5  # per backend name; older ones are removed from the cache

#: Every build; then OPTIMIZED (the default) or DEBUG (``debug=True``: for stepping with gdb).
CXXFLAGS = ["-std=c++17", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra"]
OPTIMIZED = ["-O2", "-g1"]  # -g1: line tables only, enough to show a crash at its source line
DEBUG = ["-O0", "-g"]
#: Only the entry points are exported; everything else (the helpers, inlined std:: code) stays local.
VERSION_SCRIPT = "{\n  global: TRITONBACKEND_*;\n  local: *;\n};\n"


@dataclass(frozen=True)
class Build:
    """A compiled backend library in the build cache."""

    backend: str
    library: Path
    digest: str
    seconds: float
    cached: bool

    @property
    def source(self) -> Path:
        """The source file the library was compiled from (as built: a magic cell starts with ``#line``);
        for a build from files, the first of them (all are in ``src/`` beside the library)."""
        cell = self.library.parent / f"{self.backend}.cc"
        staged = sorted((self.library.parent / STAGED).glob("*.c*")) if not cell.exists() else []
        return staged[0] if staged else cell

    def __repr__(self) -> str:
        return f"<Build {self.library.name} {self.digest[:12]}>"


def json_include() -> Path:
    """nlohmann-json's include folder (from the PyPI package nlohmann-json)."""
    try:
        import nlohmann_json
    except ImportError:
        raise SetupError(
            needed_by="A C++ build",
            missing="the nlohmann-json headers",
            reason="not installed",
            remedy="`pip install nlohmann-json`",
        ) from None
    return Path(nlohmann_json.__file__).resolve().parent / "include"


def official_headers(include_dir: str | Path | None = None) -> Path:
    """Triton's own r23.12 headers: ``include_dir`` (e.g. the NGC image's /opt/tritonserver/include),
    else core's include/ from the pinned r23.12 sources (labkit.native.triton_sources)."""
    if include_dir is not None:
        path = Path(include_dir)
        if not (path / "triton" / "core" / "tritonbackend.h").exists():
            raise SetupError(
                needed_by=f"headers={str(path)!r}",
                reason="no such file",
                remedy="give the folder that contains triton/",
                missing=str(path / "triton" / "core" / "tritonbackend.h"),
            )
        return path
    return triton_sources.source("core") / "include"


def dynamic_symbols(library: Path, toolchain: Toolchain | None = None) -> tuple[set[str], set[str]]:
    """The library's (defined, undefined) dynamic symbols, read with the toolchain's nm."""
    toolchain = toolchain or LocalToolchain()
    code, out = toolchain.run(["nm", "-D", toolchain.path(library)], library.parent)
    if code != 0:
        raise BuildError(
            backend=library.parent.parent.name,
            problem=f"could not be checked: nm could not read the symbols of {library}",
            compiler_output=out.strip(),
            remedy="check that the library is a shared object built for this machine",
        )
    defined: set[str] = set()
    undefined: set[str] = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            (undefined if fields[-2] in ("U", "w", "v") else defined).add(fields[-1].split("@")[0])
    return defined, undefined


def exported_symbols(library: Path, toolchain: Toolchain | None = None) -> set[str]:
    return dynamic_symbols(library, toolchain)[0]


_server_exports: dict[tuple[str, bytes, str], set[str]] = {}


def server_exports(toolchain: Toolchain) -> set[str] | None:
    """The functions the Triton server library this toolchain builds for exports; None if
    that library is not at hand."""
    library = toolchain.triton_library()
    if library is None:
        return None
    key = (toolchain.version(), toolchain.cache_key(), library)
    if key not in _server_exports:
        code, out = toolchain.run(["nm", "-D", "--defined-only", library], toolchain.cache_root)
        if code != 0:
            return None
        _server_exports[key] = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    return _server_exports[key]


@dataclass(frozen=True)
class BuildOptions:
    """How ``build_backend`` compiles.

    ``headers``: None for labkit's own declarations of the 23.12 C API; "official" or an include
    folder for Triton's own headers; "image" for those of the image the toolchain compiles in
    (NGC's ``/opt/tritonserver/include``). ``extra_flags``: more compiler flags. ``cache``: the build
    cache (default the toolchain's). ``progress``: print a line per build. ``toolchain`` is where to
    compile (a server's ``toolchain()``; default g++ here); ``extra_includes`` are include folders as
    that compiler sees them, searched first. ``required``: entry points the library must export; by
    default TRITONBACKEND_ModelInstanceExecute, or, for a library that exports TRITONBACKEND_ModelBatch*
    functions and no Execute (a batching strategy), all five of BATCH_ENTRY_POINTS. ``first_line``: the
    number of the source's first line (2 for a cell under a ``%%triton_cpp`` line; files keep their own).
    ``debug``: ``-O0 -g`` instead of ``-O2 -g1``, for stepping with gdb. ``cuda``: compile the cell and
    ``.cu`` files with nvcc, the rest with LABKIT_CUDA defined, and link cudart (labkit.native.cuda_build;
    here only). ``defines``: "NAME=VALUE" texts or a mapping, each a ``-DNAME=VALUE`` for the compiler
    (the utilities' and helpers' too)."""

    headers: str | Path | None = None
    extra_flags: list[str] | None = None
    cache: Path | None = None
    progress: bool = True
    toolchain: Toolchain | None = None
    extra_includes: list[str] | None = None
    required: tuple[str, ...] | None = None
    first_line: int = 1
    debug: bool = False
    cuda: bool = False
    defines: defines_.Defines = None


@dataclass(frozen=True)
class _Plan:
    """What one build compiles with: its flags, include folders and the prebuilt code it links."""

    flags: list[str]
    host_includes: list[Path]
    extra_includes: list[str]
    linked: list[Path]
    official_mode: bool
    helpers_too: bool
    kit: cuda_build.CudaKit | None


def build_backend(
    backend: str, source: str | Path | Iterable[str | Path], options: BuildOptions | None = None, **fields: Any
) -> Build:
    """Compile ``source`` into ``libtriton_<backend>.so``: C++ text, a .cc/.cpp file, a list of files,
    or a directory (its .cc/.cpp files, with the headers beside them; see labkit.native.sources), as
    ``options`` say (a BuildOptions; keyword ``fields`` replace its fields: ``build_backend(b, src, debug=True)``).

    An unchanged input is not rebuilt. Compiler messages and crash reports keep the source's own line
    numbers. A compile error's BuildError has the ``file`` and ``line`` of the first error.
    """
    opts = replace(options or BuildOptions(), **fields)
    check_name(backend, "backend")
    sources = collect(source, opts.first_line)
    toolchain = opts.toolchain or LocalToolchain()
    plan = _plan(backend, sources, opts, toolchain)
    key = digest(
        [
            backend.encode(),
            *sources.digest_parts(),
            " ".join(plan.flags).encode(),
            toolchain.version().encode(),
            toolchain.cache_key(),
            " ".join(plan.extra_includes).encode(),
            " ".join(opts.required or ("auto",)).encode(),
            cuda_build.key(plan.kit, opts.debug),
        ]
        + [folder_digest(src).encode() for src in plan.linked]  # the helpers or utilities linked in
        + [folder_digest(inc).encode() for inc in plan.host_includes]  # labkit's, Triton's and nlohmann's headers
        # include folders given as the compiler sees them: their contents when this machine sees them too
        + [folder_digest(Path(inc)).encode() for inc in plan.extra_includes if Path(inc).is_dir()]
    )
    root = opts.cache or toolchain.cache_root
    folder = root / backend / key[:16]
    library = folder / f"libtriton_{backend}.so"
    if opts.progress:  # the same line whether or not the cache answers, so notebook outputs stay stable
        print(f"building backend {backend!r}{toolchain.label} ...", end="", flush=True)
    # Two processes building the same source at once (parallel test workers, two notebooks) would write
    # the same files: the second waits and then finds the first one's library.
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.parent / f".{folder.name}.lock"):
        if library.exists():
            os.utime(library)  # the most recently used build is the one latest_build() (and export) take
            if opts.progress:
                print(" done", flush=True)
            return Build(backend, library, key, 0.0, True)
        t0 = time.perf_counter()
        try:
            partial = _compile_and_link(backend, sources, plan, opts, toolchain, folder)
        except BuildError:
            if opts.progress:
                print(" failed")
            shutil.rmtree(folder, ignore_errors=True)
            raise
        partial.rename(library)
        seconds = time.perf_counter() - t0
        if opts.progress:
            print(" done", flush=True)
        prune(folder, _KEEP_BUILDS)
        return Build(backend, library, key, seconds, False)


def _plan(backend: str, sources: Sources, opts: BuildOptions, toolchain: Toolchain) -> _Plan:
    """The flags and include folders of a build: labkit's declarations, or Triton's own headers and
    utilities (official mode), with labkit's helper layer where the source uses it."""
    kit = cuda_build.kit_for(backend, sources, toolchain, opts.cuda)
    extra_includes = list(opts.extra_includes or [])
    headers = opts.headers
    if headers == "image":
        image_headers = toolchain.triton_headers()
        if not image_headers:
            raise SetupError(
                needed_by="headers='image' (Triton's headers from the container image)",
                missing="a container image",
                reason=f"backend {backend!r} is compiled{toolchain.label or ' on this machine'}",
                remedy="use headers='official' or a folder",
            )
        extra_includes, headers = image_headers + extra_includes, None
    api = [] if headers is None else [official_headers(None if headers == "official" else headers)]
    flags = (
        CXXFLAGS
        + (DEBUG if opts.debug else OPTIMIZED)
        + list(opts.extra_flags or [])
        + defines_.compiler_flags(opts.defines)
        + cuda_build.host_flags(kit)
    )
    official_mode = any(official.uses_official_headers(text) for text in sources.texts())
    # A source may use labkit's helper layer and Triton's utilities together: then labkit's headers come
    # after Triton's, so every `triton/core/...` include finds Triton's own declarations, and the helpers
    # are compiled against those too.
    helpers_too = not official_mode or any(LABKIT_INCLUDE.search(text) for text in sources.texts())
    if official_mode:  # Triton's headers as system headers: their warnings are not the cell's
        host_includes, flags = [*api, *official.include_folders(), json_include()], official.flags_for(flags)
        linked = [triton_sources.source(repo) / "src" for repo in official.UTILITIES]
        if helpers_too:
            host_includes, linked = [*host_includes, INCLUDE_DIR], [*linked, SRC_DIR]
    else:
        host_includes, linked = [*api, INCLUDE_DIR, json_include()], [SRC_DIR]
    return _Plan(flags, host_includes, extra_includes, linked, official_mode, helpers_too, kit)


def _compile_and_link(
    backend: str, sources: Sources, plan: _Plan, opts: BuildOptions, toolchain: Toolchain, folder: Path
) -> Path:
    """Compile every unit in parallel and link them with the helpers (or utilities) into a partial
    library in ``folder``, checked; its path. A compile or link error is a BuildError."""
    flags, kit = plan.flags, plan.kit
    objects = helper_objects(toolchain, flags, plan.host_includes, plan.extra_includes) if plan.helpers_too else []
    if plan.official_mode:
        objects.append(official.utilities(toolchain, flags, plan.extra_includes))
    folder.mkdir(parents=True, exist_ok=True)
    units = [write_atomic(folder / f"{backend}.cc", sources.cell)] if sources.cell else []
    units += stage(sources, folder)
    exports = write_atomic(folder / "exports.map", VERSION_SCRIPT)
    partial = folder / f".libtriton_{backend}.so.partial"
    include = "-isystem" if plan.official_mode else "-I"
    staged = [f"-I{toolchain.path(folder / STAGED)}"] if sources.files else []
    includes = [
        *(f"-I{p}" for p in plan.extra_includes),
        *staged,
        *(f"{include}{toolchain.include(p)}" for p in plan.host_includes),
    ]
    compiled = [src.with_name(f"{backend}.o" if src.parent == folder else f"{src.name}.o") for src in units]

    def compile_unit(src: Path, obj: Path) -> tuple[int, str]:
        # A file written against Triton's C API alone (no labkit/ header marks its entry points) is
        # compiled as Triton's CMake does, default visibility (g++ drops the header's visibility from
        # an extern "C" definition inside a namespace); the version script still exports only
        # TRITONBACKEND_*.
        own = flags if LABKIT_INCLUDE.search(src.read_text()) else official.flags_for(flags)
        if kit is not None and cuda_build.by_nvcc(kit, src, folder):
            return toolchain.run(
                cuda_build.nvcc_argv(kit, opts.debug, includes, toolchain.path(src), toolchain.path(obj)), folder
            )
        return toolchain.run(["c++", *own, "-c", *includes, toolchain.path(src), "-o", toolchain.path(obj)], folder)

    with ThreadPoolExecutor(max_workers=max(1, min(len(units), os.cpu_count() or 1))) as pool:
        results = list(pool.map(compile_unit, units, compiled))
    code, messages = next(((c, m) for c, m in results if c != 0), (0, ""))
    # linked without the server library: its symbols resolve from the running server
    linking = [
        *(toolchain.path(o) for o in compiled),
        *(toolchain.path(o) for o in objects),
        *(kit.link_args() if kit else []),
    ]
    if code == 0:
        argv = [
            "c++",
            *flags,
            "-shared",
            f"-Wl,--version-script={toolchain.path(exports)}",
            *linking,
            "-o",
            toolchain.path(partial),
        ]
        code, messages = toolchain.run(argv, folder)
    src = toolchain.path(folder / f"{backend}.cc")
    if code != 0:
        output = _tidy(messages, src, backend).replace(f"{toolchain.path(folder / STAGED)}/", "")
        place = compile_error(output, folder)
        raise BuildError(
            problem=f"did not compile{toolchain.label}",
            remedy="read the compiler messages below (line numbers are those of your source)",
            backend=backend,
            compiler_output=output,
            file=place.file,
            line=place.line,
            flag=place.flag,
        )
    _check_symbols(backend, partial, toolchain, opts.required)
    _check_defined(backend, toolchain, flags, linking, folder, src)
    return partial


def _check_symbols(backend: str, library: Path, toolchain: Toolchain, required: tuple[str, ...] | None) -> None:
    """Refuse a library Triton would refuse (or that would fail at its first call): a missing entry
    point, or a call to a Triton function the 23.12 server does not have."""
    exported, undefined = dynamic_symbols(library, toolchain)
    strategy = [n for n in BATCH_ENTRY_POINTS if n in exported]
    if required is None:  # a batching strategy: all five ModelBatch* functions and no Execute
        required = BATCH_ENTRY_POINTS if len(strategy) == len(BATCH_ENTRY_POINTS) else (REQUIRED_ENTRY_POINT,)
    missing = [name for name in required if name not in exported]
    if missing:
        why = (
            "it is the one entry point Triton requires" if missing == [REQUIRED_ENTRY_POINT] else "Triton requires them"
        )
        if strategy and REQUIRED_ENTRY_POINT in missing:
            lacking = ", ".join(n for n in BATCH_ENTRY_POINTS if n not in exported)
            why += f" (as a batching strategy it would need all five TRITONBACKEND_ModelBatch* functions; it lacks {lacking})"
        raise BuildError(
            problem="compiled, but it was not loaded",
            remedy=(
                f'{why}. Define it in your source, with "labkit/backend.hpp" included (it declares the entry points '
                "exported) or marked LABKIT_EXPORT"
            ),
            backend=backend,
            missing_exports=missing,
        )
    available = server_exports(toolchain)
    unknown = sorted(s for s in undefined if s.startswith("TRITON") and available is not None and s not in available)
    if unknown:
        raise BuildError(
            problem="compiled, but it was not loaded",
            remedy="Headers newer than r23.12 declare functions this server lacks: build with labkit's own headers (the default) or Triton's r23.12 ones, and do without these calls",
            backend=backend,
            unavailable=unknown,
        )


#: A source that includes one of labkit's helper headers.
LABKIT_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]labkit/', re.MULTILINE)
_UNDEFINED = re.compile(r"undefined reference to [`']([^']+)'")


def _check_defined(
    backend: str, toolchain: Toolchain, flags: list[str], linking: list[str], folder: Path, src: str
) -> None:
    """Link once more, with ``--no-undefined`` against the server library (the kept library does not
    need it): a function that neither the backend, its libraries nor Triton defines fails here, with
    the line that calls it, not at Triton's dlopen. Skipped where the server library is not at hand."""
    server = toolchain.triton_library()
    if server is None:
        return
    check = folder / ".no-undefined-check.so"
    code, messages = toolchain.run(
        ["c++", *flags, "-shared", *linking, "-Wl,--no-undefined", server, "-o", toolchain.path(check)], folder
    )
    check.unlink(missing_ok=True)
    names = sorted(set(_UNDEFINED.findall(messages)))
    if code != 0 and names:  # any other failure of this second link is not the backend's to answer for
        output = _tidy(messages, src, backend).replace(f"{toolchain.path(folder / STAGED)}/", "")
        output = output.replace(f"{toolchain.path(folder)}/", "")
        raise BuildError(
            problem="compiled, but it was not loaded",
            remedy="define them in the backend, or link the library that does (read the linker messages below)",
            backend=backend,
            compiler_output=output,
            undefined=names,
        )


def _tidy(messages: str, src: str, backend: str) -> str:
    # Show the file as the user knows it, not the cache path.
    return re.sub(re.escape(src), f"{backend}.cc", messages).strip()


def latest_build(backend: str, toolchain: Toolchain | None = None) -> Build | None:
    """The build of ``backend`` used last (built, or answered from the cache) in the toolchain's cache, or None."""
    toolchain = toolchain or LocalToolchain()
    folder = toolchain.cache_root / check_name(backend, "backend")
    libraries = (
        sorted(folder.glob(f"*/libtriton_{backend}.so"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    )
    if not libraries:
        return None
    return Build(backend, libraries[-1], libraries[-1].parent.name, 0.0, True)


def reference_source(backend: str) -> Path:
    """The source of one of labkit's reference backends (minimal, recommended, custom)."""
    path = REFERENCE_DIR / check_name(backend, "backend") / f"{backend}.cc"
    if not path.exists():
        have = sorted(p.name for p in REFERENCE_DIR.iterdir()) if REFERENCE_DIR.exists() else []
        raise BuildError(backend=backend, problem="is not a reference backend", remedy=f"there are: {', '.join(have)}")
    return path


if __name__ == "__main__":  # python -m labkit.native.build NAME SOURCE...
    print(build_backend(sys.argv[1], [Path(p) for p in sys.argv[2:]]))
