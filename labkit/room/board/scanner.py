"""Runs in the room's scanning container: watches the participants' saved workshop notebooks and prints
them, with their mtimes, each time one changes, so that the board learns of a save within a second.

The volumes are mounted read-only at ``ROOT/<user>``; a notebook is read (as JSON, never run) only when
its mtime changed, to say whether every exercise cell is still its starter ("untouched": nothing to judge).
Stat calls are cheap: fifty participants' notebooks cost well under a millisecond a round.

    python -m labkit.room.board.scanner --root /in [--interval-s 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from fnmatch import fnmatch
from pathlib import Path

from ...course.catalogue import NOTEBOOKS
from ...errors import SubmissionError
from ..protocol import RESULT_MARK, submission_of

Found = dict[str, dict[str, list[float | bool]]]  # user -> notebook path -> [mtime, untouched]


def _untouched(path: Path) -> bool:
    try:
        return submission_of("", path.name, json.loads(path.read_text())).untouched
    except (OSError, ValueError, SubmissionError):
        return False  # unreadable: the board reads it and marks it so


def notebooks_of(top: Path) -> list[Path]:
    """The workshop notebooks in a participant's work folder and one folder down (not hidden ones)."""
    found = []
    for folder in [top, *(d for d in sorted(top.iterdir()) if d.is_dir() and not d.name.startswith("."))]:
        found += [p for p in sorted(folder.iterdir()) if p.is_file() and fnmatch(p.name, NOTEBOOKS)]
    return found


def scan(root: Path, known: dict[tuple[str, float], bool]) -> Found:
    """One round: every user's notebooks; ``known`` caches "untouched" by (path, mtime)."""
    found: Found = {}
    for user in sorted(os.listdir(root)):
        top = root / user
        try:
            paths = notebooks_of(top)
        except OSError:
            continue
        row = found.setdefault(user, {})
        for path in paths:
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            key = (str(path), mtime)
            if key not in known:
                known[key] = _untouched(path)
            row[str(path.relative_to(top))] = [mtime, known[key]]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.room.board.scanner", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="the volumes, one folder per participant")
    parser.add_argument("--interval-s", type=float, default=0.5, help="seconds between two rounds")
    args = parser.parse_args(argv)
    known: dict[tuple[str, float], bool] = {}
    last = None
    while True:
        found = scan(args.root, known)
        if found != last:
            print(RESULT_MARK + json.dumps(found), flush=True)
            last = found
        time.sleep(args.interval_s)  # a watch loop that never ends: nothing to wait for but the next round


if __name__ == "__main__":
    sys.exit(main())
