"""`labkit demo`: the tour of every lesson on a fresh server, summarised (and saved as JSON with its plots)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..course import tour
from .options import server_for, with_server


def _demo(args: argparse.Namespace) -> int:
    out_dir = Path(args.json).with_suffix("") if args.json else None  # demo.json -> demo/*.png
    with server_for(args) as server:
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


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit demo` to labkit's parser."""
    demo = with_server(sub.add_parser("demo", help="run the tour on a fresh server and summarise it"))
    demo.add_argument("--json", metavar="PATH", help="also write the summary as JSON (plots go to PATH without .json/)")
    demo.add_argument("--only", action="append", help="run only this section (repeatable)")
    demo.set_defaults(func=_demo)
