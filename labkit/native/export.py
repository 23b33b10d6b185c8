"""A backend built in the lab, as a standalone CMake project for production: its source, labkit's
helper layer, a CMakeLists.txt that fetches Triton's r23.12 repositories (or builds offline against
labkit's declarations of the C API), the models that use it, and a Dockerfile on NVIDIA's 23.12 image.

    labkit.export_backend("minimal", "minimal-backend", repository=lab.repository)
    # or: labkit export minimal minimal-backend --repository model_repository
    library = build_project("minimal-backend", prefix=lab.workspace.workdir)   # offline, PyPI cmake + ninja
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import BuildError, RepositoryError, SetupError
from ..repository import ModelRepository
from ..repository.names import check_name
from .build import REFERENCE_DIR, VERSION_SCRIPT, json_include, latest_build
from .helpers import INCLUDE_DIR, SRC_DIR
from .toolchain import Toolchain

TEMPLATES = Path(__file__).resolve().parent / "project"


def _source(backend: str, source: str | Path | None, toolchain: Toolchain | None) -> str:
    if source is not None:
        return Path(source).read_text() if isinstance(source, Path) else source
    build = latest_build(backend, toolchain)
    if build is not None and build.source.exists():
        return build.source.read_text()
    reference = REFERENCE_DIR / backend / f"{backend}.cc"
    if reference.exists():
        return reference.read_text()
    raise BuildError(
        f"No source for backend {backend!r}: it was never built here and is not a reference backend. Build it "
        f"first (lab.cpp_backend or %%triton_cpp), or pass source=.", backend=backend,
    )


def _json_version() -> str:
    try:
        return importlib.metadata.version("nlohmann-json")
    except importlib.metadata.PackageNotFoundError:
        return "3.11.3"


def export_backend(
    backend: str,
    directory: str | Path,
    *,
    source: str | Path | None = None,
    repository: ModelRepository | str | Path | None = None,
    models: list[str] | None = None,
    toolchain: Toolchain | None = None,
) -> Path:
    """Write a CMake project for ``backend`` into ``directory`` (created; an existing project of the
    same backend there is replaced, anything else refuses). Returns the directory.

    ``source``: the backend's C++ (default: its latest build in the toolchain's cache, else the
    reference backend of that name). ``repository``: where the models that use it are (default none);
    ``models``: which of them (default: every model whose config names the backend)."""
    check_name(backend, "backend")
    text = _source(backend, source, toolchain)
    target = Path(directory).resolve()
    if target.exists() and any(target.iterdir()):
        if not (target / "CMakeLists.txt").exists() or f"triton-{backend}-backend" not in (target / "CMakeLists.txt").read_text():
            raise RepositoryError(f"{target} exists and holds something else; give an empty or new folder.")
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / "src" / "labkit").mkdir(parents=True)
    (target / "src" / f"{backend}.cc").write_text(text)
    for helper in sorted(SRC_DIR.glob("*.cc")):
        shutil.copy2(helper, target / "src" / "labkit" / helper.name)
    shutil.copytree(INCLUDE_DIR / "labkit", target / "include" / "labkit")
    shutil.copytree(INCLUDE_DIR / "triton", target / "offline" / "include" / "triton")
    (target / "exports.map").write_text(VERSION_SCRIPT)
    helpers = "\n".join(f"  src/labkit/{helper.name}" for helper in sorted(SRC_DIR.glob("*.cc")))
    values = {"@BACKEND@": backend, "@JSON_VERSION@": _json_version(), "@HELPERS@": helpers}
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
        raise RepositoryError(f"Model {model!r} has no config.pbtxt in {repo.root}.")
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


def _tool(name: str) -> str:
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
        raise SetupError(f"{name} is missing; `pip install cmake ninja` (or install them with your system's packages).")
    return found


def build_project(directory: str | Path, prefix: str | Path | None = None, *, offline: bool = True,
                  progress: bool = True) -> Path:
    """Configure, build and install an exported project with CMake and Ninja; returns the installed
    library (``<prefix>/backends/<backend>/libtriton_<backend>.so``; prefix default ``<directory>/install``).
    ``offline``: against labkit's declarations and the nlohmann-json of this environment (no network)."""
    project = Path(directory).resolve()
    cmakelists = project / "CMakeLists.txt"
    if not cmakelists.exists():
        raise SetupError(f"{project} holds no CMakeLists.txt; export a backend there first.")
    backend = cmakelists.read_text().split("project(triton-", 1)[1].split("-backend", 1)[0]
    prefix = Path(prefix).resolve() if prefix is not None else project / "install"
    cmake, ninja = _tool("cmake"), _tool("ninja")
    build_dir = project / "build"
    configure = [cmake, "-S", str(project), "-B", str(build_dir), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
                 f"-DCMAKE_INSTALL_PREFIX={prefix}"]
    if offline:
        configure += ["-DTRITON_OFFLINE=ON", f"-DJSON_INCLUDE_DIR={json_include()}"]
    steps = [("configuring", configure), ("building", [cmake, "--build", str(build_dir)]),
             ("installing", [cmake, "--install", str(build_dir)])]
    for what, argv in steps:
        if progress:
            print(f"{what} {backend} ...", end="", flush=True)
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            if progress:
                print(" failed", flush=True)
            output = (proc.stdout + proc.stderr).strip()
            raise BuildError(f"CMake failed {what} {project}:\n{output[-4000:]}", backend=backend, compiler_output=output)
        if progress:
            print(" done", flush=True)
    library = prefix / "backends" / backend / f"libtriton_{backend}.so"
    if not library.exists():
        raise BuildError(f"The install step did not produce {library}.", backend=backend)
    return library


if __name__ == "__main__":  # python -m labkit.native.export NAME DIR
    print(export_backend(sys.argv[1], sys.argv[2]))
