"""`labkit serve`: a model repository served until Ctrl-C, a drop-in for ``tritonserver --model-repository``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .. import breakpoints
from ..course import reference
from ..docker import cpu_image
from ..errors import LabkitError, OptionError
from ..native import deploy
from ..python_envs import model_envs
from ..repository import ModelRepository
from ..server import ServerConfig
from ..server.logs import LogFollower
from ..server.server_config import PYTHON_BACKEND_SETTINGS
from .options import builds_reference, model_repository, port_number, server_for, with_server

TRITON_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}  # tritonserver's own defaults
AUTO_COMPLETE_WARNING = (
    "auto-complete on: {models} {have} no config.pbtxt, so Triton asks the backend for one.\n"
    "Write a config.pbtxt for each model to keep auto-complete off: each model then serves the config you see."
)


def backend_config_options(texts: list[str]) -> dict[str, Any]:
    """tritonserver's ``--backend-config=BACKEND,KEY=VALUE`` as ServerConfig options: the Python backend's
    shared memory and stub timeout by name, any other setting passed to Triton as it was given."""
    options: dict[str, Any] = {}
    extra = []
    for text in texts:
        backend, _, setting = text.partition(",")
        key, equals, value = setting.partition("=")
        if not (backend and key and equals):
            raise OptionError(option="--backend-config", value=text, valid="BACKEND,KEY=VALUE")
        if (backend, key) == ("python", "shm-region-prefix-name"):
            raise OptionError(
                option="--backend-config",
                value=text,
                valid="another setting (labkit names each server's shared-memory regions, so two never share one)",
            )
        if backend == "python" and key in PYTHON_BACKEND_SETTINGS:
            if not value.isdigit():
                raise OptionError(option=f"--backend-config=python,{key}", value=value, valid="a whole number above 0")
            options[PYTHON_BACKEND_SETTINGS[key]] = int(value)
        else:
            extra.append(f"--backend-config={text}")
    return {**options, "extra_args": tuple(extra)} if extra else options


def serve_options(args: argparse.Namespace, unconfigured: list[str]) -> dict[str, Any]:
    """The ServerConfig options of `labkit serve`: Triton's ports unless --any-ports, auto-complete
    when a model has no config, the person's backend folder, and their --backend-config settings."""
    ports = {f"{name}_port": getattr(args, f"{name}_port") for name in TRITON_PORTS}
    ports = {
        key: (0 if args.any_ports else TRITON_PORTS[key[:-5]]) if port is None else port for key, port in ports.items()
    }
    backends = backend_config_options(getattr(args, "backend_config", None) or [])
    ServerConfig(**ports, **backends)  # ports that clash, a size that is not one: OptionError before anything starts
    return {**ports, **backends, "auto_complete": bool(unconfigured), "backend_directory": args.backend_directory}


def _serve(args: argparse.Namespace) -> int:
    repo = model_repository(Path(args.repository))
    unconfigured = [m for m in ModelRepository(repo).unconfigured() if not args.model or m in args.model]
    options = serve_options(args, unconfigured)
    if unconfigured:
        print(
            AUTO_COMPLETE_WARNING.format(
                models=", ".join(unconfigured), have="has" if len(unconfigured) == 1 else "have"
            ),
            file=sys.stderr,
            flush=True,
        )
    build_reference = builds_reference(args, repo)
    own = reference.is_reference_repository(repo)  # labkit's own models: served from a copy in the server's workspace
    envs = _model_envs(args, repo)  # before Triton starts: a first build takes minutes, and may fail
    named: dict[str, Path | str] = dict(envs)  # each environment as Triton sees it
    if envs and args.server == "docker":  # mounted read-only where the copy's configs say
        inside, options["volumes"] = model_envs.container_envs(envs)
        named.update(inside)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server = server_for(args, None if own or envs else repo, **options)
    follower = LogFollower(server.logs, lambda line: print(line, file=sys.stderr, flush=True)).start()
    try:
        server.start()
        if own:  # never built into: the reference repository stays as shipped (as committed in a checkout)
            reference.copy_into(server, args.model)
        elif envs:  # a copy whose configs name the environments: the person's files stay as they are
            model_envs.copy_with_envs(server.repository, repo, named)
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
        if own or envs:
            print(f"repository {server.repository.root} (a copy of {repo}, removed when the server stops)")
        for name, env in envs.items():
            print(f"env      {name}: {env}{'' if str(env) == str(named[name]) else f' (at {named[name]} inside)'}")
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


def _model_envs(args: argparse.Namespace, repo: Path) -> dict[str, Path]:
    """The environment of each model served that declares its packages (requirements.txt), built or found
    in labkit's cache for the stub that will run it (the embedded server's, or the image's), with progress
    on stderr."""
    image = (args.image or cpu_image.IMAGE) if args.server == "docker" else None
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    return model_envs.envs_for(repo, args.model, progress=say, runtime=args.server, image=image)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit serve` to labkit's parser."""
    serve = with_server(
        sub.add_parser(
            "serve",
            help="serve a model repository until Ctrl-C (a drop-in for tritonserver --model-repository)",
            description="Serve a model repository until Ctrl-C or SIGTERM, on Triton's ports 8000/8001/8002 "
            "(127.0.0.1). Triton's log (the models' print() and pb_utils.Logger lines) shows here as it "
            "comes; the log file is kept and its path printed at exit. A model folder without "
            "config.pbtxt turns Triton's auto-complete on (with a warning). A model folder with a requirements.txt "
            "gets an environment built from it (pip install --no-deps, once, into labkit's cache) and is served "
            "from a copy whose config names it. The repository is served as it is: nothing is built or written "
            "into it (unless --build-reference-backends).",
        )
    )
    serve.add_argument("repository", nargs="?", default="model_repository")
    serve.add_argument("--model", action="append", help="load only this model (repeatable)")
    for name, port in TRITON_PORTS.items():
        serve.add_argument(
            f"--{name}-port",
            type=port_number,
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
        "--backend-config",
        action="append",
        metavar="BACKEND,KEY=VALUE",
        help="as tritonserver's (repeatable): python,shm-default-byte-size=BYTES, python,shm-growth-byte-size=BYTES "
        "and python,stub-timeout-seconds=S size the Python backend's shared memory and its stubs' start-up wait; "
        "any other setting goes to Triton as given",
    )
    serve.add_argument(
        "--build-reference-backends",
        action="store_true",
        help="build labkit's reference C++ backends (minimal, recommended, custom) for models "
        "that name them, writing the library into their version folders (done anyway for "
        "labkit's own model_repository)",
    )
    serve.set_defaults(func=_serve)
