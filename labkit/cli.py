"""The `labkit` command: serve a repository, run the demo tour, the benchmarks and perf_analyzer sweeps,
build C++ backends into a backend directory, set up the cache, manage Docker.

Exit codes: 0 done (checks passed); 1 a check did not pass (`workshop check`: an exercise is not yet
passed; `doctor`: a required item is missing; `demo`: a tour check failed; `serve`: Triton exited);
2 a usage error (argparse: unknown command, bad or missing argument); 3 labkit stopped and said what
went wrong (a LabkitError, printed as `labkit: ...`).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from . import benchmark as bench, breakpoints, doctor
from .course import reference, tour, workshop
from .docker import cpu_image
from .docker.orphans import cleanup
from .errors import ConfigError, LabkitError, SetupError
from .native import Build, build_backend, cmake_build, deploy, export_backend
from .observe import perf_dist
from .observe.perf_analyzer import check_steps, perf as sweep_with_perf_analyzer
from .plumbing import triton_dist
from .plumbing.transport import Transport
from .python_envs import command as python_env_cli
from .repository import ModelRepository, repository_export
from .room import commands as room_cli
from .server import ServerConfig, create, kinds
from .server.logs import LogFollower

EXIT_OK = 0
EXIT_NOT_PASSED = 1  # a verdict, not an error: `workshop check` not yet, `doctor` FAIL, a demo check
EXIT_USAGE = 2  # argparse's own code for a command line it cannot parse
EXIT_LABKIT_ERROR = 3  # a LabkitError: labkit said what went wrong and what to do


def _server(args: argparse.Namespace, repository: Path | None = None, **config: Any) -> Any:
    """The server the command asked for (--server, --image), not yet started."""
    options = {"image": args.image} if args.server == "docker" and args.image else {}
    return create(args.server, repository, **options, **config)


TRITON_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}  # tritonserver's own defaults
AUTO_COMPLETE_WARNING = (
    "auto-complete on: {models} {have} no config.pbtxt, so Triton asks the backend for one.\n"
    "Write a config.pbtxt for each model to keep auto-complete off: each model then serves the config you see."
)


def _builds_reference(args: argparse.Namespace, repo: Path) -> bool:
    """Only labkit's own models get labkit's reference C++ backends built (written into their version
    folders), or a person's when asked (--build-reference-backends); a person's repository is served as
    it is, its libraries included."""
    return args.build_reference_backends or reference.is_reference_repository(repo)


def _check_own_library(repo: Path, model: str, backend_directory: str | None) -> None:
    """A person's model that names a reference backend (minimal, recommended, custom) is served with
    the person's library, never labkit's: refuse before a server starts when there is none to serve."""
    backend = ModelRepository(repo).read_config(model).backend
    if not (deploy.REFERENCE_DIR / backend).is_dir():
        return  # Triton says itself what is missing for any other backend (labkit never built those)
    library = f"libtriton_{backend}.so"
    places = [repo / model / library, *(repo / model).glob(f"*/{library}")]
    if backend_directory:
        places.append(Path(backend_directory) / backend / library)
    if not any(p.is_file() for p in places):
        raise SetupError(
            f"Model {model!r} in {repo} uses backend {backend!r}, but no {library} is in its folder"
            f"{' or in ' + str(backend_directory) if backend_directory else ''}, and labkit does not put its own "
            f"reference {backend!r} in a repository of yours unasked. Give --backend-directory DIR holding "
            f"{backend}/{library} (`labkit build-backend {backend} SOURCE --out DIR` writes one), put {library} in "
            f"the model's version folder, or pass --build-reference-backends to measure labkit's reference "
            f"{backend!r} (written into the model's version folder).",
            missing=str(
                Path(backend_directory) / backend / library if backend_directory else repo / model / "1" / library
            ),
            reason="no backend library",
        )


def _serve_options(args: argparse.Namespace, unconfigured: list[str]) -> dict[str, Any]:
    """The ServerConfig options of `labkit serve`: Triton's ports unless --any-ports, auto-complete
    when a model has no config, the person's backend folder."""
    ports = {f"{name}_port": getattr(args, f"{name}_port") for name in TRITON_PORTS}
    ports = {
        key: (0 if args.any_ports else TRITON_PORTS[key[:-5]]) if port is None else port for key, port in ports.items()
    }
    try:
        ServerConfig(**ports)  # ports that clash: a usage error, said before anything starts
    except ValueError as exc:
        raise LabkitError(f"{exc}; give three different ports.") from None
    return {**ports, "auto_complete": bool(unconfigured), "backend_directory": args.backend_directory}


def _serve(args: argparse.Namespace) -> int:
    repo = Path(args.repository)
    if not repo.is_dir():
        raise LabkitError(f"No model repository at {repo}; give a folder holding <model>/config.pbtxt.")
    unconfigured = [m for m in ModelRepository(repo).unconfigured() if not args.model or m in args.model]
    options = _serve_options(args, unconfigured)
    if unconfigured:
        print(
            AUTO_COMPLETE_WARNING.format(
                models=", ".join(unconfigured), have="has" if len(unconfigured) == 1 else "have"
            ),
            file=sys.stderr,
            flush=True,
        )
    build_reference = _builds_reference(args, repo)
    own = reference.is_reference_repository(repo)  # labkit's own models: served from a copy in the server's workspace
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server = _server(args, None if own else repo, **options)
    follower = LogFollower(server.logs, lambda line: print(line, file=sys.stderr, flush=True)).start()
    try:
        server.start()
        if own:  # never built into: the reference repository stays as shipped (as committed in a checkout)
            reference.copy_into(server, args.model)
        names = args.model or sorted({*server.repository.models(), *unconfigured})
        failed = {}
        for name in names:
            try:
                if build_reference:
                    deploy.load_models(server.models, [name])  # builds C++ reference backends first
                else:
                    server.load(name)
            except LabkitError as exc:
                failed[name] = str(exc)
        for name, url in server.endpoints.urls().items():
            print(f"{name:8s} {url}")
        print(f"serving  {', '.join(server.loaded_models()) or 'no models'}")
        if own:
            print(f"repository {server.repository.root} (a copy of {repo}, removed when the server stops)")
        for name, reason in failed.items():
            print(f"NOT LOADED {name}: {reason}", file=sys.stderr)
        print(
            f"log      {server.logs.path}\nPress Ctrl-C to stop. A breakpoint() in a model.py opens pdb here.",
            flush=True,
        )
        breakpoints.attach_any(server)  # any client's request may stop at a breakpoint: we attach
        while not stop.wait(0.2):
            if not server.alive:
                print("Triton exited:\n" + server.logs.tail(20), file=sys.stderr)
                return 1
            for hit in breakpoints.stops(server):
                with follower.paused():  # pdb talks in this terminal
                    breakpoints.attach(hit)
    finally:
        follower.stop()
        server.stop(keep_log=True)
        if server.logs.path.exists():
            print(f"log kept {server.logs.path}", flush=True)
    print("stopped.")
    return 0


def _demo(args: argparse.Namespace) -> int:
    out_dir = Path(args.json).with_suffix("") if args.json else None  # demo.json -> demo/*.png
    with _server(args) as server:
        print(f"starting Triton 23.12 ({args.server}) ...", flush=True)
        server.start()
        report = tour.run(server, out_dir, args.only)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(tour.summary(report))
    if args.json:
        print(f"wrote {args.json}")
    return 0 if report["ok"] else 1


def _bench(args: argparse.Namespace) -> int:
    results = bench.run(args.only, lambda: _server(args))
    results = {"server": args.server, **results}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def _export(args: argparse.Namespace) -> int:
    repository = Path(args.repository) if args.repository else None
    if repository is None and Path("model_repository").is_dir():
        repository = Path("model_repository")
    if repository is not None and not repository.is_dir():
        raise LabkitError(f"No model repository at {repository}; give a folder holding <model>/config.pbtxt.")
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
                "A folder holding CMakeLists.txt is built by its own CMake project, alone: give it as "
                "the only SOURCE, without --headers (the project chooses its headers).",
                field="source",
                value=" ".join(args.source),
            )
        build = cmake_build.build_cmake(args.backend, sources[0], defines=args.define, debug=args.debug)
    else:
        build = build_backend(args.backend, sources, headers=args.headers, debug=args.debug, defines=args.define)
    took = "from the cache" if build.cached else f"built in {build.seconds:.1f} s"
    print(f"wrote {deploy.into_backend_directory(build, args.out)} ({took})")
    return 0


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535 (0: a free one), not {text!r}")
    return int(text)


def _numbers(text: str, kind: type = int) -> list:
    try:
        return [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, not {text!r}") from None


def _perf(args: argparse.Namespace) -> int:
    check_steps(args.concurrency, args.request_rate)  # before a server starts
    source = Path(args.repository) if args.repository else reference.repository()
    if not (source / args.model / "config.pbtxt").is_file():
        raise LabkitError(f"No model {args.model!r} in {source}; give --repository holding <model>/config.pbtxt.")
    own = reference.is_reference_repository(
        source
    )  # labkit's models: copied into the server's workspace, reference backends built
    build_reference = _builds_reference(args, source)
    if not build_reference:
        _check_own_library(source, args.model, args.backend_directory)
    shapes = {}
    for item in args.shape or []:
        name, _, dims = item.partition(":")
        shapes[name] = _numbers(dims)
    # A person's repository is served where it is (its libraries included), as `labkit serve` does.
    with _server(args, None if own else source, backend_directory=args.backend_directory) as server:
        print(f"starting Triton 23.12 ({args.server}) with {args.model} ...", flush=True)
        server.start()
        if own:
            reference.copy_into(server, [args.model])
        if build_reference:
            deploy.load_models(server.models, [args.model])  # builds a C++ reference backend first
        else:
            server.load(args.model)
        sweep = sweep_with_perf_analyzer(
            server,
            args.model,
            concurrency=args.concurrency,
            request_rate=args.request_rate,
            distribution=args.distribution,
            protocol=args.protocol,
            batch=args.batch,
            shapes=shapes,
            measurement_ms=args.measurement_ms,
            stability_percent=args.stability_percent,
        )
    print(sweep.table())
    if args.json:
        print(f"wrote {sweep.to_json(args.json)}")
    return 0


def _setup(args: argparse.Namespace) -> int:
    dist = triton_dist.locate()
    print(f"tritonserver  {dist.binary}")
    print(f"perf_analyzer {perf_dist.locate(check=True).binary}")
    from .native.official import (
        rapidjson_include,  # official-mode C++ builds (Triton's triton_json.h)
    )

    print(f"rapidjson     {rapidjson_include()}")
    if args.cuda:
        from .gpu import cuda_kit  # about 105 MB of wheels: only when asked

        kit = cuda_kit.locate()
        print(f"nvcc          {kit.nvcc} ({kit.version()})")
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    removed = cleanup(all=args.all)
    print("\n".join(f"removed {name}" for name in removed) or "no leftovers")
    return 0


def parser() -> argparse.ArgumentParser:
    """The `labkit` command line (the site's CLI reference is generated from it)."""
    description, _, epilog = __doc__.partition("\n\n")
    root = argparse.ArgumentParser(
        prog="labkit", description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = root.add_subparsers(dest="command", required=True)

    def with_server(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--server", choices=kinds(), default="embedded", help="where Triton runs (default: embedded)")
        p.add_argument("--image", help="Docker image for --server docker (default: the offline CPU image)")
        return p

    serve = with_server(
        sub.add_parser(
            "serve",
            help="serve a model repository until Ctrl-C (a drop-in for tritonserver --model-repository)",
            description="Serve a model repository until Ctrl-C or SIGTERM, on Triton's ports 8000/8001/8002 "
            "(127.0.0.1). Triton's log (the models' print() and pb_utils.Logger lines) shows here as it "
            "comes; the log file is kept and its path printed at exit. A model folder without "
            "config.pbtxt turns Triton's auto-complete on (with a warning). The repository is served "
            "as it is: nothing is built or written into it (unless --build-reference-backends).",
        )
    )
    serve.add_argument("repository", nargs="?", default="model_repository")
    serve.add_argument("--model", action="append", help="load only this model (repeatable)")
    for name, port in TRITON_PORTS.items():
        serve.add_argument(
            f"--{name}-port",
            type=_port,
            metavar="PORT",
            help=f"{name} port (default {port}; taken: labkit stops at once, PortTakenError)",
        )
    serve.add_argument(
        "--any-ports",
        action="store_true",
        help="listen on free ports labkit picks, not 8000/8001/8002 (those given still count)",
    )
    serve.add_argument(
        "--backend-directory",
        metavar="DIR",
        help="serve the backends built in DIR (DIR/<name>/libtriton_<name>.so) beside labkit's "
        "Python backend; DIR is linked, never written",
    )
    serve.add_argument(
        "--build-reference-backends",
        action="store_true",
        help="build labkit's reference C++ backends (minimal, recommended, custom) for models "
        "that name them, writing the library into their version folders (done anyway for "
        "labkit's own model_repository)",
    )
    serve.set_defaults(func=_serve)

    demo = with_server(sub.add_parser("demo", help="run the tour on a fresh server and summarise it"))
    demo.add_argument("--json", metavar="PATH", help="also write the summary as JSON (plots go to PATH without .json/)")
    demo.add_argument("--only", action="append", help="run only this section (repeatable)")
    demo.set_defaults(func=_demo)

    bench = with_server(sub.add_parser("bench", help="measure start, reload, build and load-generation figures"))
    bench.add_argument("--json", metavar="PATH")
    bench.add_argument("--only", action="append", help="run only this benchmark (repeatable)")
    bench.set_defaults(func=_bench)

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

    repository_export.add_command(sub)  # labkit export-repository

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

    perf_cmd = with_server(
        sub.add_parser("perf", help="measure a model with perf_analyzer 23.12 across concurrencies or request rates")
    )
    perf_cmd.add_argument("model")
    perf_cmd.add_argument("--repository", help="where the model is (default: the reference models)")
    perf_cmd.add_argument(
        "--backend-directory",
        metavar="DIR",
        help="serve the backends built in DIR (DIR/<name>/libtriton_<name>.so); DIR is linked, never written",
    )
    perf_cmd.add_argument(
        "--build-reference-backends",
        action="store_true",
        help="build labkit's reference C++ backend when the model names one (minimal, recommended, "
        "custom), writing it into the model's version folder (done anyway for labkit's own models)",
    )
    perf_cmd.add_argument("--concurrency", type=_numbers, help="e.g. 1,2,4,8 (the default)")
    perf_cmd.add_argument(
        "--request-rate", type=lambda t: _numbers(t, float), help="requests per second, e.g. 100,200,400"
    )
    perf_cmd.add_argument(
        "--distribution",
        choices=["constant", "poisson"],
        default="constant",
        help="how request-rate arrivals are spaced",
    )
    perf_cmd.add_argument("--protocol", choices=Transport.choices(), default=Transport.HTTP.value)
    perf_cmd.add_argument("--batch", type=int, default=1, help="rows per request (batching models)")
    perf_cmd.add_argument("--shape", action="append", help="NAME:D1,D2 for an input with -1 dimensions (repeatable)")
    perf_cmd.add_argument("--measurement-ms", type=int, default=1000, help="length of a measurement window")
    perf_cmd.add_argument("--stability-percent", type=float, default=10)
    perf_cmd.add_argument("--json", metavar="PATH", help="also write the table as JSON")
    perf_cmd.set_defaults(func=_perf)

    setup = sub.add_parser(
        "setup", help="fetch Triton 23.12, perf_analyzer 23.12 and RapidJSON's headers into labkit's cache (once)"
    )
    setup.add_argument(
        "--cuda",
        action="store_true",
        help="also nvcc and cudart (CUDA 13.0 wheels, about 105 MB) for %%%%triton_cpp NAME --cuda",
    )
    setup.set_defaults(func=_setup)

    cleanup = sub.add_parser("cleanup", help="remove Docker containers left by killed labkit sessions")
    cleanup.add_argument("--all", action="store_true", help="remove every labkit container, live owners too")
    cleanup.set_defaults(func=_cleanup)

    check = sub.add_parser("doctor", help="check this machine for the lab: one line per item, with what to do")
    check.set_defaults(func=lambda args: doctor.main())

    work = sub.add_parser(
        "workshop",
        help="the notebooks' exercises: `labkit workshop check [NOTEBOOK...|--all] "
        "[--solutions]` or `labkit workshop reset NOTEBOOK`",
    )
    work.add_argument("args", nargs=argparse.REMAINDER)
    work.set_defaults(func=lambda args: workshop.main(args.args))

    image = sub.add_parser("image", help="the offline CPU Triton image: `labkit image build [--force]` or `status`")
    image.add_argument("args", nargs=argparse.REMAINDER)
    image.set_defaults(func=lambda args: cpu_image.main(args.args))

    room_cli.register(sub)
    python_env_cli.register(sub)
    return root


def main(argv: list[str] | None = None) -> int:
    command_line = parser()
    args = command_line.parse_args(argv)
    if getattr(args, "server", None) == "docker" and not args.image:
        args.image = cpu_image.IMAGE
    if getattr(args, "concurrency", None) and getattr(args, "request_rate", None):
        command_line.error("give --concurrency or --request-rate, not both")
    try:
        return args.func(args)
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return EXIT_LABKIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
