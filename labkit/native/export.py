"""A backend built in the lab, as a standalone CMake project for production: its sources (every file,
with the headers beside them), labkit's helper layer when they use it, a CMakeLists.txt that fetches
Triton's r23.12 repositories (or builds offline against labkit's declarations of the C API, or, for a
backend written against Triton's own headers, against Triton's pinned sources), the models that use it,
and a Dockerfile on NVIDIA's 23.12 image.

    labkit.export_backend("minimal", "minimal-backend", repository=lab.repository)
    # or: labkit export minimal minimal-backend --repository model_repository
    library = build_project("minimal-backend", prefix=lab.workspace.workdir)   # offline, PyPI cmake + ninja
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from ..errors import BuildError, MissingConfigError, RepositoryError, SetupError
from ..repository import ModelRepository
from ..repository.names import check_name
from . import official, triton_sources
from .build import (
    LABKIT_INCLUDE,
    REFERENCE_DIR,
    VERSION_SCRIPT,
    Build,
    json_include,
    latest_build,
)
from .helpers import INCLUDE_DIR, SRC_DIR
from .sources import STAGED, Sources, collect
from .toolchain import Toolchain, build_tool

_tool = build_tool  # its name here before labkit.native.toolchain held it (tests import it)

TEMPLATES = Path(__file__).resolve().parent / "project"


def _sources(
    backend: str,
    source: str | Path | Iterable[str | Path] | None,
    toolchain: Toolchain | None,
    build: Build | None = None,
) -> Sources:
    """What to export: ``source`` as a build takes it, else every file of ``build`` (its cell, and the files
    and headers staged beside it) or of the backend's latest build in the cache, else the reference backend."""
    if source is not None:
        return collect(source)
    build = build or latest_build(backend, toolchain)
    if build is not None:
        folder = build.library.parent
        items: list[str | Path] = (
            [(folder / f"{backend}.cc").read_text()] if (folder / f"{backend}.cc").exists() else []
        )
        if (folder / STAGED).is_dir():
            items.append(folder / STAGED)
        if items:
            return collect(items)
    reference = REFERENCE_DIR / backend / f"{backend}.cc"
    if reference.exists():
        return collect(reference)
    raise BuildError(
        problem="has no source: it was never built here and is not a reference backend",
        remedy="Build it first (lab.cpp_backend or %%triton_cpp), or pass source=",
        backend=backend,
    )


def _write_sources(sources: Sources, backend: str, src: Path) -> list[str]:
    """The sources and the headers beside them into ``src/`` under their own names (a cell as
    ``<backend>.cc``); returns the files to compile, relative to the project."""
    names = [name for name, _ in sources.files]
    for name, text in (*sources.files, *sources.headers):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    if sources.cell:
        cell = f"{backend}.cc" if f"{backend}.cc" not in names else f"{backend}_cell.cc"
        (src / cell).write_text(sources.cell)
        names.insert(0, cell)
    return [f"src/{name}" for name in names]


def _json_version() -> str:
    try:
        return importlib.metadata.version("nlohmann-json")
    except importlib.metadata.PackageNotFoundError:
        return "3.11.3"


def export_backend(
    backend: str,
    directory: str | Path,
    *,
    source: str | Path | Iterable[str | Path] | None = None,
    repository: ModelRepository | str | Path | None = None,
    models: list[str] | None = None,
    toolchain: Toolchain | None = None,
    build: Build | None = None,
) -> Path:
    """Write a CMake project for ``backend`` into ``directory`` (created; an existing project of the
    same backend there is replaced, anything else refuses). Returns the directory.

    ``source``: the backend's sources as a build takes them (C++ text, files, folders; see
    labkit.native.sources); default: every file of ``build`` (a server's ``export_backend`` passes the
    server's own latest build), else of the latest build in the toolchain's cache, else the reference
    backend of that name. A source written against Triton's own headers (official mode) gets
    Triton's backend utilities compiled and linked, as labkit's build does; labkit's helper layer is
    exported when a source uses it. ``repository``: where the models that use it are (default none);
    ``models``: which of them (default: every model whose config names the backend)."""
    check_name(backend, "backend")
    sources = _sources(backend, source, toolchain, build)
    texts = sources.texts()
    official_mode = any(official.uses_official_headers(text) for text in texts)
    helpers = not official_mode or any(LABKIT_INCLUDE.search(text) for text in texts)
    target = Path(directory).resolve()
    if target.exists() and any(target.iterdir()):
        if (
            not (target / "CMakeLists.txt").exists()
            or f"triton-{backend}-backend" not in (target / "CMakeLists.txt").read_text()
        ):
            raise RepositoryError(
                subject=str(target),
                problem=f"exists and holds something else than backend {backend!r}'s project",
                refused=str(target),
                remedy="give an empty or new folder",
            )
        shutil.rmtree(target)
    (target / "src").mkdir(parents=True)
    compiled = _write_sources(sources, backend, target / "src")
    # the CUDA helpers stay behind: the exported CMake project builds with a host compiler only
    helper_files = sorted(p for p in SRC_DIR.glob("*.cc") if p.name != "labkit_cuda.cc") if helpers else []
    if helpers:
        (target / "src" / "labkit").mkdir()
        for helper in helper_files:
            shutil.copy2(helper, target / "src" / "labkit" / helper.name)
        shutil.copytree(
            INCLUDE_DIR / "labkit", target / "include" / "labkit", ignore=shutil.ignore_patterns("cuda.hpp")
        )
    if not official_mode:
        shutil.copytree(INCLUDE_DIR / "triton", target / "offline" / "include" / "triton")
    (target / "exports.map").write_text(VERSION_SCRIPT)
    utilities = [
        f"    ${{TRITON_{repo.upper()}_SOURCE_DIR}}/src/{name}.cc"
        for repo, names in official.UTILITIES.items()
        for name in names
    ]
    values = {
        "@BACKEND@": backend,
        "@JSON_VERSION@": _json_version(),
        "@OFFICIAL@": "ON" if official_mode else "OFF",
        "@USES_HELPERS@": "ON" if helpers else "OFF",
        "@UTILITIES@": "\n".join(utilities),
        "@SOURCES@": "\n".join(f"  {name}" for name in compiled),
        "@HELPERS@": "\n".join(f"  src/labkit/{helper.name}" for helper in helper_files),
    }
    for template in TEMPLATES.glob("*.in"):
        text_out = template.read_text()
        for key, value in values.items():
            text_out = text_out.replace(key, value)
        (target / template.name.removesuffix(".in")).write_text(text_out)
    (target / "models").mkdir()
    if repository is not None:
        repo = repository if isinstance(repository, ModelRepository) else ModelRepository(repository)
        for model in models if models is not None else repo.models_using(backend):
            _copy_model(repo, model, target / "models" / model)
    return target


def _copy_model(repo: ModelRepository, model: str, target: Path) -> None:
    """The model's config and files, its newest version's files as version 1, without the library
    labkit put there (the installed backend serves instead)."""
    source = repo.model_dir(model)
    if not (source / "config.pbtxt").exists():
        raise MissingConfigError(model=model, source=str(source / "config.pbtxt"))
    target.mkdir(parents=True)
    versions = repo.versions(model)
    for item in source.iterdir():
        if item.is_file():
            shutil.copy2(item, target / item.name)
    (target / "1").mkdir()
    if versions:
        for item in (source / str(max(versions))).iterdir():
            if item.is_file() and not item.name.startswith("libtriton_"):
                shutil.copy2(item, target / "1" / item.name)


def build_project(
    directory: str | Path, prefix: str | Path | None = None, *, offline: bool = True, progress: bool = True
) -> Path:
    """Configure, build and install an exported project with CMake and Ninja; returns the installed
    library (``<prefix>/backends/<backend>/libtriton_<backend>.so``; prefix default ``<directory>/install``).
    ``offline``: no network: against labkit's declarations and the nlohmann-json of this environment, or
    for an official-mode backend Triton's pinned r23.12 sources and RapidJSON (labkit.native.triton_sources)."""
    project = Path(directory).resolve()
    cmakelists = project / "CMakeLists.txt"
    if not cmakelists.exists():
        raise SetupError(
            missing=str(project / "CMakeLists.txt"), reason="no such file", remedy="export a backend there first"
        )
    backend = cmakelists.read_text().split("project(triton-", 1)[1].split("-backend", 1)[0]
    prefix = Path(prefix).resolve() if prefix is not None else project / "install"
    cmake, ninja = build_tool("cmake"), build_tool("ninja")
    build_dir = project / "build"
    configure = [
        cmake,
        "-S",
        str(project),
        "-B",
        str(build_dir),
        "-G",
        "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={ninja}",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
    ]
    if offline:
        configure += ["-DTRITON_OFFLINE=ON", f"-DJSON_INCLUDE_DIR={json_include()}"]
        if "set(LABKIT_OFFICIAL_MODE ON)" in cmakelists.read_text():  # Triton's pinned sources, as official mode builds
            configure += [
                f"-DTRITON_{repo.upper()}_SOURCE_DIR={triton_sources.source(repo)}" for repo in triton_sources.PINNED
            ]
            configure += [f"-DRAPIDJSON_INCLUDE_DIR={official.rapidjson_include()}"]
    steps = [
        ("configuring", configure),
        ("building", [cmake, "--build", str(build_dir)]),
        ("installing", [cmake, "--install", str(build_dir)]),
    ]
    for what, argv in steps:
        if progress:
            print(f"{what} {backend} ...", end="", flush=True)
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            if progress:
                print(" failed", flush=True)
            output = (proc.stdout + proc.stderr).strip()
            raise BuildError(
                problem=f"did not export: CMake failed {what} {project}",
                remedy="read CMake's messages below",
                backend=backend,
                compiler_output=output,
            )
        if progress:
            print(" done", flush=True)
    library = prefix / "backends" / backend / f"libtriton_{backend}.so"
    if not library.exists():
        raise BuildError(
            problem=f"did not export: the install step did not produce {library}",
            remedy="check the project's install() rules",
            backend=backend,
        )
    return library


if __name__ == "__main__":  # python -m labkit.native.export NAME DIR
    print(export_backend(sys.argv[1], sys.argv[2]))
