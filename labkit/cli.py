"""The `labkit` command: serve a repository, run the demo tour, run the benchmarks."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from .errors import LabkitError


def _serve(args: argparse.Namespace) -> int:
    from .native import deploy
    from .server import EmbeddedServer

    repo = Path(args.repository)
    if not repo.is_dir():
        raise LabkitError(f"No model repository at {repo}; give a folder holding <model>/config.pbtxt.")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedServer(repo) as server:
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
        print(f"log      {server.logs.path}\nPress Ctrl-C to stop.", flush=True)
        while not stop.wait(0.5):
            if not server.alive:
                print("Triton exited:\n" + server.logs.tail(20), file=sys.stderr)
                return 1
    print("stopped.")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from . import tour
    from .server import EmbeddedServer

    out_dir = Path(args.json).with_suffix("") if args.json else None  # demo.json -> demo/*.png
    with EmbeddedServer() as server:
        print("starting Triton 23.12 (embedded) ...", flush=True)
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
    from . import bench

    results = bench.run(args.only)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve a model repository until Ctrl-C")
    serve.add_argument("repository", nargs="?", default="model_repository")
    serve.add_argument("--model", action="append", help="load only this model (repeatable)")
    serve.set_defaults(func=_serve)

    demo = sub.add_parser("demo", help="run the tour on a fresh embedded server and summarise it")
    demo.add_argument("--json", metavar="PATH", help="also write the summary as JSON (plots go to PATH without .json/)")
    demo.add_argument("--only", action="append", help="run only this section (repeatable)")
    demo.set_defaults(func=_demo)

    bench = sub.add_parser("bench", help="measure cold start and reload times")
    bench.add_argument("--json", metavar="PATH")
    bench.add_argument("--only", action="append", help="run only this benchmark (repeatable)")
    bench.set_defaults(func=_bench)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
