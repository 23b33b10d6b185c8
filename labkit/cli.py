"""The `labkit` command: serve a repository, run the demo tour and the benchmarks, manage Docker."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from . import bench, breakpoints, tour
from .docker import cpu_image
from .docker.leftovers import cleanup
from .errors import LabkitError
from .native import deploy
from .server import create, kinds


def _server(args: argparse.Namespace, repository: Path | None = None) -> Any:
    """The server the command asked for (--server, --image), not yet started."""
    options = {"image": args.image} if args.server == "docker" and args.image else {}
    return create(args.server, repository, **options)


def _serve(args: argparse.Namespace) -> int:
    repo = Path(args.repository)
    if not repo.is_dir():
        raise LabkitError(f"No model repository at {repo}; give a folder holding <model>/config.pbtxt.")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with _server(args, repo) as server:
        server.start()
        names = args.model or server.repository.models()
        failed = {}
        for name in names:
            try:
                deploy.load_models(server, [name])  # builds C++ reference backends first
            except LabkitError as exc:
                failed[name] = str(exc)
        for name, url in server.urls().items():
            print(f"{name:8s} {url}")
        print(f"serving  {', '.join(server.loaded_models()) or 'no models'}")
        for name, reason in failed.items():
            print(f"NOT LOADED {name}: {reason}", file=sys.stderr)
        print(f"log      {server.logs.path}\nPress Ctrl-C to stop. A breakpoint() in a model.py opens pdb here.",
              flush=True)
        breakpoints.attach_any(server)  # any client's request may stop at a breakpoint: we attach
        while not stop.wait(0.2):
            if not server.alive:
                print("Triton exited:\n" + server.logs.tail(20), file=sys.stderr)
                return 1
            for hit in breakpoints.stops(server):
                breakpoints.attach(hit)
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


def _cleanup(args: argparse.Namespace) -> int:
    removed = cleanup(all=args.all)
    print("\n".join(f"removed {name}" for name in removed) or "no leftovers")
    return 0


def _image(args: argparse.Namespace) -> int:
    return cpu_image.main(args.args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def with_server(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--server", choices=kinds(), default="embedded", help="where Triton runs (default: embedded)")
        p.add_argument("--image", help="Docker image for --server docker (default: the offline CPU image)")
        return p

    serve = with_server(sub.add_parser("serve", help="serve a model repository until Ctrl-C"))
    serve.add_argument("repository", nargs="?", default="model_repository")
    serve.add_argument("--model", action="append", help="load only this model (repeatable)")
    serve.set_defaults(func=_serve)

    demo = with_server(sub.add_parser("demo", help="run the tour on a fresh server and summarise it"))
    demo.add_argument("--json", metavar="PATH", help="also write the summary as JSON (plots go to PATH without .json/)")
    demo.add_argument("--only", action="append", help="run only this section (repeatable)")
    demo.set_defaults(func=_demo)

    bench = with_server(sub.add_parser("bench", help="measure start, reload, build and load-generation figures"))
    bench.add_argument("--json", metavar="PATH")
    bench.add_argument("--only", action="append", help="run only this benchmark (repeatable)")
    bench.set_defaults(func=_bench)

    cleanup = sub.add_parser("cleanup", help="remove Docker containers left by killed labkit sessions")
    cleanup.add_argument("--all", action="store_true", help="remove every labkit container, live owners too")
    cleanup.set_defaults(func=_cleanup)

    image = sub.add_parser("image", help="the offline CPU Triton image: `labkit image build [--force]` or `status`")
    image.add_argument("args", nargs=argparse.REMAINDER)
    image.set_defaults(func=_image)

    args = parser.parse_args(argv)
    if getattr(args, "server", None) == "docker" and not args.image:
        args.image = cpu_image.IMAGE
    try:
        return args.func(args)
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
