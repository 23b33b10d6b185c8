"""Child processes that cannot outlive the Python process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path

from ..errors import WaitTimeoutError
from .polling import wait_until

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    # Runs in the child between fork and exec. SIGKILL of the parent (a killed kernel)
    # skips atexit, so the kernel must do the cleanup: PDEATHSIG asks it to.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def spawn(argv: list[str], env: dict[str, str], log_path: Path, cwd: Path) -> subprocess.Popen:
    """Start ``argv`` in its own process group, output appended to ``log_path``."""
    parent = os.getpid()
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: die_with_parent(parent),
        )


def stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the whole group (server and Python stubs), SIGKILL whatever is left after ``grace_s``."""
    pgid = proc.pid  # start_new_session made the child its group's leader
    if proc.poll() is not None:  # the server already died: nothing left to shut down gracefully
        grace_s = 0.0
    try:
        os.killpg(pgid, signal.SIGTERM if grace_s else signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    # The stubs may still be finishing after the server exits; give them a moment, then kill.
    try:
        wait_until(lambda: not group_alive(pgid), 2.0 if grace_s else 0.0, "the stubs to exit", interval_s=0.05)
    except WaitTimeoutError:
        pass  # killed next
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
