"""What killed labkit sessions leave on this machine, found and removed at the next launch:
work folders (with a tritonserver still running from one) and the Python backend's shared memory."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path

from ..plumbing.owner import UNKNOWN, Owner
from .runtime import OWNER_FILE, OWNER_START_FILE, SERVER_FILE, WORKDIR_PREFIX

_SHM = Path("/dev/shm")


def free_shm(prefix: str) -> None:
    """Unlink the shared-memory regions named with ``prefix`` (a killed stub cannot)."""
    for region in _SHM.glob(f"{prefix}*"):
        region.unlink(missing_ok=True)


def _sweep_stale_shm() -> None:
    """Unlink the Python backend's regions of labkit processes that are gone (named labkit_<pid>_...)."""
    for region in _SHM.glob("labkit_*_*"):
        owner = region.name.split("_")[1]
        if owner.isdigit() and int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
            region.unlink(missing_ok=True)


def _folder_owner(folder: Path) -> Owner | None:
    try:
        pid = int((folder / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None  # not one of ours, or being created right now
    try:
        start = (folder / OWNER_START_FILE).read_text().strip() or UNKNOWN
    except OSError:
        start = UNKNOWN
    return Owner(socket.gethostname(), pid, start)


def _kill_started_from(folder: Path) -> None:
    """SIGKILL every process whose command line names ``folder`` (a dead owner's work folder)."""
    needle = str(folder).encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in cmdline.read_bytes():
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to kill


def sweep() -> None:
    """Clean up after owners that are gone (a killed kernel cannot): end a Triton still running
    from their folder, then remove the folder. Only folders with our owner file are touched."""
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        owner = _folder_owner(folder)
        if owner is None or owner.pid == os.getpid() or not owner.dead():
            continue
        try:
            server = int((folder / SERVER_FILE).read_text())
            cmdline = Path(f"/proc/{server}/cmdline").read_bytes()
        except (OSError, ValueError):
            server, cmdline = 0, b""
        # Kill only a tritonserver started with this folder (pids get reused), and its stubs with it.
        if b"tritonserver" in cmdline and str(folder).encode() in cmdline:
            try:
                os.killpg(server, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _kill_started_from(folder)  # stubs that outlived a server that died: their command names the folder
        shutil.rmtree(folder, ignore_errors=True)
    _sweep_stale_shm()  # after the servers above are gone, so their stubs no longer hold regions
