"""`labkit room ...`: the room's subcommands, registered on labkit's command line."""

from __future__ import annotations

import argparse


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `labkit room` and its subcommands to labkit's parser."""
    room = sub.add_parser("room", help="a workshop room on JupyterHub: `labkit room up|status|grades|down|k8s|bench`")
    room.add_subparsers(dest="room_command", required=True)
