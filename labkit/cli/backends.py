"""`labkit export` (a C++ backend as a standalone CMake project) and `labkit build-backend` (a backend
compiled into Triton's backend-directory layout)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError
from ..native import Build, BuildOptions, build_backend, cmake_build, deploy, export_backend
from .options import model_repository


def _export(args: argparse.Namespace) -> int:
    repository = Path(args.repository) if args.repository else None
    if repository is None and Path("model_repository").is_dir():
        repository = Path("model_repository")
    if repository is not None:
        repository = model_repository(repository)
    sources = [Path(p) for p in args.source] if args.source else None
    project = export_backend(args.backend, args.directory, source=sources, repository=repository, models=args.model)
    models = sorted(p.name for p in (project / "models").iterdir())
    print(f"wrote {project} (backend {args.backend!r}; models: {', '.join(models) or 'none'})")
    print(
        f"build: cmake -S {project} -B {project}/build && cmake --build {project}/build && cmake --install {project}/build"
        f"\n       (offline: add -DTRITON_OFFLINE=ON; see {project}/README.md)"
        f"\nNVIDIA's 23.12 image, built with it and its models: docker build -t tritonserver-{args.backend} {project}"
        f" && docker run --rm -p 8000:8000 -p 8001:8001 -p 8002:8002 tritonserver-{args.backend}"
    )
    return 0


def _build_backend(args: argparse.Namespace) -> int:
    sources = [Path(p) for p in args.source]
    build: Build
    if any(cmake_build.is_project(p) for p in sources):  # the repository's own CMake project, as it builds
        if len(sources) > 1 or args.headers:
            raise ConfigError(
                problem="a folder holding CMakeLists.txt is built by its own CMake project, alone",
                remedy="give it as the only SOURCE, without --headers (the project chooses its headers)",
                field="source",
                value=" ".join(args.source),
            )
        build = cmake_build.build_cmake(args.backend, sources[0], defines=args.define, debug=args.debug)
    else:
        options = BuildOptions(headers=args.headers, debug=args.debug, defines=args.define)
        build = build_backend(args.backend, sources, options)
    took = "from the cache" if build.cached else f"built in {build.seconds:.1f} s"
    print(f"wrote {deploy.into_backend_directory(build, args.out)} ({took})")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit export` and `labkit build-backend` to labkit's parser."""
    export = sub.add_parser(
        "export",
        aliases=["export-backend"],  # the old name keeps working
        help="write a standalone CMake project (and Dockerfile) for a C++ backend",
    )
    export.add_argument("backend")
    export.add_argument("directory")
    export.add_argument("--repository", help="where the models that use it are (default: ./model_repository if any)")
    export.add_argument(
        "--source",
        action="append",
        help="a .cc/.cpp file or a folder of them, with the headers beside "
        "(repeatable; default: every file of its latest build here, else the reference backend)",
    )
    export.add_argument("--model", action="append", help="export only this model (repeatable)")
    export.set_defaults(func=_export)

    built = sub.add_parser(
        "build-backend",
        help="compile a C++ backend into DIR/NAME/libtriton_NAME.so (Triton's "
        "backend-directory layout; nothing else in DIR is touched)",
    )
    built.add_argument("backend", metavar="NAME")
    built.add_argument(
        "source",
        nargs="+",
        metavar="SOURCE",
        help=".cc/.cpp files or folders (their headers beside "
        "them), or one folder holding CMakeLists.txt (a backend's repository, built by its own CMake project)",
    )
    built.add_argument(
        "--out", required=True, metavar="DIR", help="the backend directory (e.g. for serve --backend-directory)"
    )
    built.add_argument("--headers", help="'official' or an include folder with Triton's own headers")
    built.add_argument(
        "--debug", action="store_true", help="build -O0 -g, for stepping with gdb (CMake: a Debug build)"
    )
    built.add_argument(
        "--define",
        action="append",
        metavar="NAME=VALUE",
        help="a CMake option or cache entry (e.g. TRITON_ENABLE_METRICS=OFF), or for a source build a "
        "macro (-D to the compiler); repeatable",
    )
    built.set_defaults(func=_build_backend)
