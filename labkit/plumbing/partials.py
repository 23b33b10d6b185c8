"""The private folders that ``fill_once`` fills before renaming them into place (``<target>.partial-<pid>``),
and the sweep of those whose process died before it could remove its own (SIGKILL, the OOM killer, a power cut).

A process holds an exclusive ``flock`` on ``<partial>.lock`` while it fills ``<partial>``: the kernel lets go of
it the moment that process is gone, whatever PID namespace it ran in and even if its number is reused, so a
lock that can be taken marks a folder nobody fills any more. A folder without a lock file (left by a labkit
from before the lock) is judged by its PID alone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_MARK = ".partial-"
_LOCK = ".lock"


def partial_for(target: Path, pid: int | None = None) -> Path:
    """The private folder process ``pid`` (this one by default) fills for ``target``."""
    return target.with_name(f"{target.name}{_MARK}{os.getpid() if pid is None else pid}")


@contextmanager
def claimed(partial: Path) -> Iterator[Path]:
    """``partial``, marked as being filled by this process for as long as the block runs."""
    lock = partial.with_name(partial.name + _LOCK)
    partial.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # only another thread of this process could hold it: wait for it
        try:
            yield partial
        finally:
            shutil.rmtree(partial, ignore_errors=True)
            _unlink(lock)
    finally:
        os.close(fd)


def sweep(target: Path) -> list[Path]:
    """Remove each partial folder of ``target`` whose process is gone; those still being filled stay.
    Returns the folders removed."""
    removed: list[Path] = []
    try:
        siblings = sorted(target.parent.glob(f"{target.name}{_MARK}*"))
    except OSError:
        return removed
    pids = {path.name[len(target.name) + len(_MARK) :].removesuffix(_LOCK) for path in siblings}
    for pid in sorted(p for p in pids if p.isdigit() and int(p) != os.getpid()):
        # (this process's own folder is its own business: fill_once empties it before filling it)
        path = partial_for(target, int(pid))
        if _remove_if_abandoned(path, int(pid)) and path.name in {s.name for s in siblings}:
            removed.append(path)
    return removed


def _remove_if_abandoned(path: Path, pid: int) -> bool:
    lock = path.with_name(path.name + _LOCK)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:  # no lock: a labkit from before it, judged by its PID
        if _alive(pid):
            return False
        shutil.rmtree(path, ignore_errors=True)
        return True
    except OSError:
        return False  # a lock this user cannot open is not this user's to judge
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its process is still filling it
            return False
        if not _same_file(fd, lock):  # its owner finished, and a new claim of that name began since
            return False
        # Removed while holding the lock: a process that takes it next finds no folder, not half of one.
        shutil.rmtree(path, ignore_errors=True)
        _unlink(lock)
        return True
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` may still write (a zombie, dead but not yet reaped, writes nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
