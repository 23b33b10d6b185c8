"""The room's own processes, known by the records written as each one started: the hub, its proxy, the
board and the idle culler. A record holds a pid and that process's start time, so it never names another
process that reuses the pid after its own ended; `room up` and `room down` end what the records name,
whichever of them a crashed hub left behind, and never look for a process by its name.

    python -m labkit.room.hub.processes FOLDER ROLE -- COMMAND...   # records itself as ROLE, then becomes COMMAND

The hub starts its proxy and services through that line (``command_for``): the record is written by the
process itself before it becomes the program (``exec``: the same pid), so no start goes unrecorded.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

FOLDER = "processes"  # <room>/processes/<role>.json
_SAME_START_S = 0.05  # start times are kept in clock ticks (1/100 s): the same process reads the same


@dataclass(frozen=True)
class ProcessRecord:
    """``role``'s process: its pid and start time (psutil's ``create_time``, seconds since the epoch)."""

    role: str
    pid: int
    started: float


def folder_of(directory: Path) -> Path:
    return Path(directory).absolute() / FOLDER


def command_for(directory: Path, role: str, command: list[str] | tuple[str, ...], python: str) -> list[str]:
    """``command``, started so that it records itself as ``role`` of the room in ``directory`` first."""
    return [python, "-m", "labkit.room.hub.processes", str(folder_of(directory)), role, "--", *command]


def write(folder: Path, role: str, pid: int) -> ProcessRecord:
    """Record ``pid`` as ``role`` (atomically: a reader never sees half a record)."""
    record = ProcessRecord(role, pid, psutil.Process(pid).create_time())
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{role}-", dir=folder)
    with os.fdopen(fd, "w") as handle:
        json.dump({"pid": record.pid, "started": record.started}, handle)
    os.replace(tmp, folder / f"{role}.json")
    return record


def read(folder: Path) -> list[ProcessRecord]:
    """Every record in ``folder``; one that cannot be read names no process, and is dropped."""
    found = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text())
            found.append(ProcessRecord(path.stem, int(data["pid"]), float(data["started"])))
        except (OSError, ValueError, TypeError, KeyError):
            path.unlink(missing_ok=True)
    return found


def running(record: ProcessRecord) -> psutil.Process | None:
    """The process ``record`` names while it runs (same pid, same start; an ended one not yet reaped is
    not running), else None."""
    try:
        process = psutil.Process(record.pid)
        if abs(process.create_time() - record.started) > _SAME_START_S:
            return None  # the pid was given to another process
        if process.status() == psutil.STATUS_ZOMBIE:
            _reap(record.pid)
            return None
        return process
    except psutil.Error:
        return None


def _reap(pid: int) -> None:
    try:  # our own child (a hub started by this process): collect its exit status
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # another's child: its parent (or init) reaps it


def find(folder: Path, role: str) -> psutil.Process | None:
    """The running process recorded as ``role``, or None."""
    return next((p for r in read(folder) if r.role == role and (p := running(r)) is not None), None)


def end(folder: Path, roles: tuple[str, ...] = (), timeout_s: float = 30.0) -> list[str]:
    """End the running processes recorded in ``folder`` (those of ``roles``, or all): SIGTERM, then SIGKILL
    what still runs after ``timeout_s`` (the board removes its containers when asked to stop). Their records
    go. What was ended, one ``role (pid N)`` each."""
    chosen = [r for r in read(folder) if not roles or r.role in roles]
    alive = {r.role: p for r in chosen if (p := running(r)) is not None}
    for process in alive.values():
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, left = psutil.wait_procs(list(alive.values()), timeout=timeout_s)
    for process in left:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=5)
    for record in chosen:
        (Path(folder) / f"{record.role}.json").unlink(missing_ok=True)
    return [f"{role} (pid {process.pid})" for role, process in sorted(alive.items())]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4 or args[2] != "--":
        print("usage: python -m labkit.room.hub.processes FOLDER ROLE -- COMMAND...", file=sys.stderr)
        return 2
    folder, role, command = Path(args[0]), args[1], args[3:]
    write(folder, role, os.getpid())
    os.execvp(command[0], command)  # the same pid, now the program: the record names it


if __name__ == "__main__":
    sys.exit(main())
