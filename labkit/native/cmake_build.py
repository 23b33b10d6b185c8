"""A backend's own CMake project (a folder holding CMakeLists.txt, e.g. a clone of identity_backend or
Triton's examples/backends/recommended), built the way its repository builds it: its CMakeLists.txt,
its options and flags, with the PyPI cmake and ninja, cached by content like every labkit build.

What labkit adds on the command line, nothing in the project:

- Triton's repositories at r23.12 from labkit.native.triton_sources (``FETCHCONTENT_SOURCE_DIR_REPO-CORE``,
  ``-COMMON``, ``-BACKEND``; the pinned archives of ``$LABKIT_TRITON_SOURCES``, then FetchContent is
  fully disconnected, or GitHub's once), and the repo tags forced to r23.12, with a warning naming the
  project's own tag where it differs (a ``main`` build has a newer backend API than 23.12's 1.17, and a backend that checks the version in its ``TRITONBACKEND_Initialize``, as Triton's ``recommended`` example does, refuses to load);
- RapidJSON for Triton common's ``find_package(RapidJSON CONFIG)``: the headers labkit.native.official
  already uses, and a stand-in for the googletest common fetches for its own unit test (not built);
- ``TRITON_ENABLE_GPU`` as the machine allows (ON with a GPU and a CUDA 12 toolkit), the compiler labkit's
  builds use, and a run path holding ``libtritonserver.so``: backends link core's server stub, and the
  embedded server's library has another name (the link is to that library, so Triton's own is used).

A person's ``defines`` (``--define NAME=VALUE``) win over all of that, except the tags. Only the target
that makes ``libtriton_<backend>.so`` is built (and what it needs), never the project's tests.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import BuildError, ConfigError, SetupError
from ..plumbing import gpu_probe
from ..plumbing.downloads import cache_dir, fill_once
from ..repository.names import check_name
from . import defines as defines_, official, triton_sources
from .build import Build, _check_symbols
from .diagnostics import Place, cmake_error, compile_error
from .helpers import digest, folder_digest, prune
from .toolchain import COMPILER_ENV, LocalToolchain, build_tool, compiler

TAG = "r23.12"
TAGS = ("TRITON_BACKEND_REPO_TAG", "TRITON_CORE_REPO_TAG", "TRITON_COMMON_REPO_TAG")
_OWN_TAG = re.compile(r'^[ \t]*set\([ \t]*(TRITON_(?:BACKEND|CORE|COMMON)_REPO_TAG)[ \t]+"?([^"\s)]*)', re.MULTILINE)
_KEEP_BUILDS = 5  # per backend name, as for source builds
_SKIPPED = {".git", "__pycache__"}  # never part of a project's content

GOOGLETEST = """\
# labkit's stand-in for the googletest Triton common's CMake fetches for its own unit test (src/test):
# the two targets that test links, and the test left out of every build. Nothing is downloaded.
get_directory_property(caller PARENT_DIRECTORY)
file(REAL_PATH "${caller}" caller)
file(REAL_PATH "${FETCHCONTENT_SOURCE_DIR_REPO-COMMON}/src/test" common_tests)
if(NOT caller STREQUAL common_tests)
  message(FATAL_ERROR "labkit supplies googletest only to Triton common's own tests, which it does not build; "
    "this project fetches googletest itself: pass --define FETCHCONTENT_SOURCE_DIR_GOOGLETEST=<a googletest folder>")
endif()
add_library(labkit-googletest-stand-in INTERFACE)
add_library(GTest::gtest ALIAS labkit-googletest-stand-in)
add_library(GTest::gtest_main ALIAS labkit-googletest-stand-in)
set_property(DIRECTORY "${caller}" PROPERTY EXCLUDE_FROM_ALL ON)
"""
RAPIDJSON = """\
# labkit's RapidJSON package: the headers of labkit.native.official.rapidjson_include(), found by
# find_package(RapidJSON CONFIG) as Triton common's CMake asks.
set(RapidJSON_FOUND TRUE)
set(RAPIDJSON_INCLUDE_DIRS "@INCLUDE@")
set(RapidJSON_INCLUDE_DIRS "@INCLUDE@")
if(NOT TARGET RapidJSON)
  add_library(RapidJSON INTERFACE IMPORTED)
  set_target_properties(RapidJSON PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "@INCLUDE@")
endif()
"""


@dataclass(frozen=True, repr=False)  # repr: Build's short one
class CMakeBuild(Build):
    """A library built by a CMake project: ``project`` its folder, ``defines`` the options and cache
    entries it was configured with beyond the project's defaults (a person's, and labkit's
    TRITON_ENABLE_GPU and tags), ``retagged`` the project's own repo tags labkit replaced by r23.12."""

    project: Path = Path()
    defines: dict[str, str] = field(default_factory=dict)
    retagged: dict[str, str] = field(default_factory=dict)


def is_project(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a CMakeLists.txt (built by ``build_cmake``)."""
    return Path(path).is_dir() and (Path(path) / "CMakeLists.txt").is_file()


def own_tags(project: Path) -> dict[str, str]:
    """The repo tags a project's top CMakeLists.txt sets (e.g. {"TRITON_CORE_REPO_TAG": "main"})."""
    return dict(_OWN_TAG.findall((project / "CMakeLists.txt").read_text()))


def gpu_default() -> str:
    """TRITON_ENABLE_GPU as this machine allows: ON with a visible GPU and a CUDA toolkit up to 12 (23.12 was
    built with 12.3; CUDA 13's nvcc no longer knows the GPU architectures backend r23.12's kernel is built
    for), OFF otherwise. ``--define TRITON_ENABLE_GPU=...`` overrides it."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    nvcc = shutil.which("nvcc") or str(Path(home) / "bin" / "nvcc")
    if not gpu_probe.visible() or not Path(nvcc).is_file():
        return "OFF"
    try:
        code, out = _run([nvcc, "--version"], Path.cwd())
    except SetupError:  # an nvcc that does not run is no toolkit
        return "OFF"
    release = re.search(r"release (\d+)\.", out)
    return "ON" if code == 0 and release and int(release.group(1)) <= 12 else "OFF"


def _stand_ins() -> Path:
    """The folder holding ``googletest/CMakeLists.txt`` and ``rapidjson/RapidJSONConfig.cmake``."""
    rapidjson = RAPIDJSON.replace("@INCLUDE@", str(official.rapidjson_include()))
    target = cache_dir() / "cmake-stand-ins" / digest([GOOGLETEST.encode(), rapidjson.encode()])[:16]

    def write(partial: Path) -> None:
        (partial / "googletest").mkdir()
        (partial / "googletest" / "CMakeLists.txt").write_text(GOOGLETEST)
        (partial / "rapidjson").mkdir()
        (partial / "rapidjson" / "RapidJSONConfig.cmake").write_text(rapidjson)

    return fill_once(target, write)


def _server_link(toolchain: LocalToolchain) -> Path | None:
    """A folder holding ``libtritonserver.so``, a link to the embedded server's library (the wheel
    renamed it); None where that library is not at hand. Refreshed on each build."""
    library = toolchain.triton_library()
    if library is None:
        return None
    folder = toolchain.cache_root / ".triton-server"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "libtritonserver.so"
    if not link.is_symlink() or os.readlink(link) != library:
        partial = folder / f".libtritonserver.so.{os.getpid()}"
        partial.unlink(missing_ok=True)
        partial.symlink_to(library)
        partial.replace(link)  # atomic: a server loading a backend now never sees no link
    return folder


def _settings(toolchain: LocalToolchain, given: dict[str, str], debug: bool) -> dict[str, str]:
    """labkit's cache entries for a configure; ``given`` (a person's defines) replaces any of them."""
    stand_ins = _stand_ins()
    settings = {
        f"FETCHCONTENT_SOURCE_DIR_REPO-{repo.upper()}": str(triton_sources.tree(repo))
        for repo in ("core", "common", "backend")
    }
    settings |= {
        "FETCHCONTENT_SOURCE_DIR_GOOGLETEST": str(stand_ins / "googletest"),
        "RapidJSON_DIR": str(stand_ins / "rapidjson"),
        **{name: TAG for name in TAGS},
        "TRITON_ENABLE_GPU": gpu_default(),
        "CMAKE_CXX_COMPILER": compiler(),
        "CMAKE_MAKE_PROGRAM": build_tool("ninja"),
    }
    if os.environ.get(triton_sources.ENV, "").strip():  # offline: nothing else may be fetched either
        settings["FETCHCONTENT_FULLY_DISCONNECTED"] = "ON"
    if debug:
        settings["CMAKE_BUILD_TYPE"] = "Debug"
    link = _server_link(toolchain)
    if link is not None:
        settings["CMAKE_BUILD_RPATH"] = str(link)
    named = {defines_.name_of(entry) for entry in given}
    return {name: value for name, value in settings.items() if name not in named} | given


def _project_digest(project: Path) -> str:
    """A hash of the project's files (names and contents), without .git and CMake build folders in it."""
    builds = {p.parent for p in project.rglob("CMakeCache.txt")}
    files = sorted(
        p
        for p in project.rglob("*")
        if p.is_file()
        and not _SKIPPED & set(p.relative_to(project).parts)
        and not any(p.is_relative_to(b) for b in builds)
    )
    return digest([p.relative_to(project).as_posix().encode() + b"\0" + p.read_bytes() for p in files])


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            argv, check=False, capture_output=True, text=True, cwd=cwd, env={**os.environ, **COMPILER_ENV}
        )
    except OSError as exc:
        raise SetupError(
            needed_by="A CMake build",
            missing=argv[0],
            reason="does not run",
            detail=str(exc),
            remedy="`pip install cmake ninja` (labkit's environment has them)",
        ) from None
    return proc.returncode, proc.stdout + proc.stderr


def _forced_tags(given: dict[str, str]) -> None:
    for entry, value in given.items():
        if defines_.name_of(entry) in TAGS and value != TAG:
            raise ConfigError(
                problem=f"labkit builds against Triton 23.12's repositories, so {defines_.name_of(entry)} is {TAG}",
                remedy=f"leave it out (a backend built at {value!r} may need an API 23.12 lacks)",
                field="define",
                value=f"{entry}={value}",
                valid=[TAG],
            )


def _warn_retagged(project: Path, retagged: dict[str, str]) -> None:
    for value in sorted(set(retagged.values())):
        names = ", ".join(name for name, own in retagged.items() if own == value)
        why = (
            (
                " (at 'main' its backend API is newer than 23.12's 1.17: a backend that checks the version in its"
                " TRITONBACKEND_Initialize, as Triton's recommended example does, would refuse to load)"
            )
            if value == "main"
            else ""
        )
        print(
            f"labkit: warning: {project.name}/CMakeLists.txt sets {names} to {value!r}; labkit builds it at "
            f"{TAG}{why}.",
            file=sys.stderr,
            flush=True,
        )


def build_cmake(
    backend: str,
    project: str | Path,
    *,
    defines: defines_.Defines = None,
    debug: bool = False,
    progress: bool = True,
    cache: Path | None = None,
    toolchain: LocalToolchain | None = None,
) -> CMakeBuild:
    """Configure and build the CMake project in ``project`` into ``libtriton_<backend>.so`` (see the module's doc).

    ``defines``: "NAME=VALUE" texts or a mapping, passed as ``-DNAME=VALUE`` (e.g. TRITON_ENABLE_METRICS=OFF,
    CMAKE_CXX_FLAGS=-Wno-error=...); the project's own defaults hold for the rest. ``debug``: a Debug
    build. An unchanged project, defines and Triton sources are not built again. A failed configure or
    build is a BuildError with ``file`` and ``line`` (the CMake file's, or the compiler's first error),
    ``command`` (the step that failed) and ``flag`` (the warning the project's -Werror made an error)."""
    check_name(backend, "backend")
    project = Path(project).expanduser().resolve()
    if not is_project(project):
        raise SetupError(
            needed_by=f"A CMake build of {project}",
            reason="no such file",
            remedy="give the folder of the backend's CMake project (the repository's root), or its sources' folder for a build without CMake",
            missing=str(project / "CMakeLists.txt"),
        )
    toolchain = toolchain or LocalToolchain()
    given = defines_.parse(defines)
    _forced_tags(given)
    cmake = build_tool("cmake")
    settings = _settings(toolchain, given, debug)
    retagged = {name: value for name, value in own_tags(project).items() if value != TAG}
    # What the library depends on: the person's defines and labkit's choices among the options (paths are
    # covered by the digests of what they hold).
    configured = {name: settings[name] for name in (*TAGS, "TRITON_ENABLE_GPU") if name in settings} | given
    key = _key(backend, project, configured, debug, toolchain, cmake)
    folder = (cache or toolchain.cache_root) / ".cmake" / backend / key[:16]
    library = folder / f"libtriton_{backend}.so"
    result = CMakeBuild(backend, library, key, 0.0, True, project, configured, retagged)
    _warn_retagged(project, retagged)
    if progress:
        print(f"building backend {backend!r} with CMake ({project.name}) ...", end="", flush=True)
    if library.exists():
        os.utime(library)
        if progress:
            print(" done", flush=True)
        return result
    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=folder))  # its own: two builds at once never share one
    partial = folder / f".libtriton_{backend}.so.{os.getpid()}.partial"
    try:
        target = _configure_and_build(backend, project, work, cmake, settings)
        shutil.copy2(work / target, partial)
        _check_symbols(backend, partial, toolchain, None)
    except BuildError:
        if progress:
            print(" failed", flush=True)
        partial.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(OSError):  # a failed build leaves no folder (one built at once by another stays)
            folder.rmdir()
    partial.rename(library)
    if progress:
        print(" done", flush=True)
    prune(folder, _KEEP_BUILDS)
    return CMakeBuild(backend, library, key, time.perf_counter() - t0, False, project, configured, retagged)


def _key(
    backend: str, project: Path, configured: dict[str, str], debug: bool, toolchain: LocalToolchain, cmake: str
) -> str:
    """The build's cache key: the project's files, its configured options, the tools and Triton's sources."""
    return digest(
        [
            b"cmake",
            backend.encode(),
            _project_digest(project).encode(),
            "\0".join(f"{n}={v}" for n, v in sorted(configured.items())).encode(),
            b"debug" if debug else b"",
            toolchain.version().encode(),
            _run([cmake, "--version"], project)[1].encode(),
            GOOGLETEST.encode(),
            RAPIDJSON.encode(),
            *(folder_digest(triton_sources.tree(repo)).encode() for repo in ("core", "common", "backend")),
            folder_digest(official.rapidjson_include()).encode(),
        ]
    )


def _configure_and_build(backend: str, project: Path, work: Path, cmake: str, settings: dict[str, str]) -> str:
    """Configure into ``work`` and build the one target that makes libtriton_<backend>.so; its path in ``work``."""
    argv = [cmake, "-S", str(project), "-B", str(work), "-G", "Ninja", *defines_.cmake_args(settings)]
    code, output = _run(argv, project)
    if code != 0:
        place = cmake_error(output, project, Path(cmake).resolve().parent.parent / "share")
        raise BuildError(
            problem=f"could not be configured: CMake failed on project {project.name}",
            remedy="Fix the project or change an option with --define NAME=VALUE",
            backend=backend,
            compiler_output=output,
            file=place.file,
            line=place.line,
            command=shlex.join(argv),
        )
    ninja = settings["CMAKE_MAKE_PROGRAM"]
    code, listing = _run([ninja, "-C", str(work), "-t", "targets", "all"], project)
    wanted = f"libtriton_{backend}.so"
    outputs = [line.split(":", 1)[0] for line in listing.splitlines() if ":" in line]
    found = [out for out in outputs if Path(out).name == wanted]
    if not found:
        others = sorted({Path(out).name for out in outputs if re.fullmatch(r"libtriton_\w+\.so", Path(out).name)})
        raise BuildError(
            problem=(
                f"is not built by {project.name}: it builds no {wanted} (Triton loads the backend from that file), "
                f"but {', '.join(others) or 'no libtriton_*.so'}"
            ),
            remedy="name the backend after its library",
            backend=backend,
            file="CMakeLists.txt",
        )
    build = [ninja, "-C", str(work), found[0]]
    code, output = _run(build, project)
    if code != 0:  # the step Ninja names as failed, else the build itself
        place = compile_error(output, project)
        place = replace(place, command=place.command or shlex.join(build))
        raise BuildError(
            problem=f"did not compile (project {project.name})",
            remedy=compile_remedy(place),
            backend=backend,
            compiler_output=output,
            file=place.file,
            line=place.line,
            command=place.command,
            flag=place.flag,
        )
    return found[0]


def compile_remedy(place: Place) -> str:
    """What to do when a CMake project's build failed at ``place``: a -Werror flag can be overridden."""
    if place.flag:
        option = place.flag.removeprefix("-W")
        variable = "CMAKE_C_FLAGS" if place.file.endswith(".c") else "CMAKE_CXX_FLAGS"
        return (
            f"labkit leaves the project's flags as they are: fix the code, or pass --define "
            f"{variable}=-Wno-error={option} to build it with that warning shown"
        )
    return "fix the code at that place (the command and its messages are below)"
