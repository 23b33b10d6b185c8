"""`labkit room ...`: the room's subcommands, registered on labkit's command line."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `labkit room` and its subcommands to labkit's parser."""
    room = sub.add_parser("room", help="a workshop room on JupyterHub: `labkit room up|status|grades|down|k8s|bench`")
    commands = room.add_subparsers(dest="room_command", required=True)
    grades = commands.add_parser("grades", help="the board's table (participants × exercises) as CSV")
    grades.add_argument("--dir", type=Path, default=Path("room"), help="the room's folder (default: ./room)")
    grades.add_argument("--csv", type=Path, help="write the table to this file (default: print it)")
    grades.set_defaults(func=_grades)


def _grades(args: argparse.Namespace) -> int:
    from .progress import export_grades

    return export_grades(args.dir, args.csv)
