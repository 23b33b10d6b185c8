"""Who started a server: a process identity that survives pid reuse, and the test for "that owner is dead".

A killed kernel cannot clean up after itself, so the next labkit launch removes what dead owners left
(a server's work folder, a container). A pid alone is not proof: the kernel reuses pids, so the start
time of the process is recorded beside it and compared.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

UNKNOWN = "?"  # a start time that could not be read (no /proc): never judged a mismatch


def process_start(pid: int) -> str | None:
    """A token for when process ``pid`` started ("?" where /proc cannot tell), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return UNKNOWN


@dataclass(frozen=True)
class Owner:
    """A process on a host, with its start time."""

    host: str
    pid: int
    start: str = UNKNOWN

    @classmethod
    def me(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start(pid) or UNKNOWN)

    def dead(self) -> bool:
        """True when this process is gone. Owners on other hosts are never judged dead."""
        if self.host != socket.gethostname():
            return False
        started = process_start(self.pid)
        if started is None:
            return True
        # the pid now belongs to another process
        return UNKNOWN not in (started, self.start) and started != self.start
