"""Wait until Triton's threads are idle before a model is unloaded or replaced (a Triton 2.41 race).

When a model is unloaded (or replaced by a reload), a thread Triton starts for the purpose deletes
it; ``TritonModelInstance::TritonBackendThread::StopBackendThread()`` then reads the deque of
instances of each backend thread, unlocked, while that backend thread may still be putting its
instance back after its last payload: the warm-up that ends a load, or the inference whose response
was just sent. Triton answers the load (or the request) before that bookkeeping, so an unload sent
right after it can read the deque mid-update, and the server dies with SIGSEGV (seen once in about a
hundred unloads right after a load on a busy two-core machine; the crash is in StopBackendThread,
called from ~TritonModelInstance in the model deleter's thread). The bookkeeping takes microseconds
unless the backend thread is preempted in it, and a preempted thread is runnable: so labkit waits
until no thread of the Triton process is runnable before it asks for an unload or a reload.
"""

from __future__ import annotations

import time
from pathlib import Path

#: Process states of a thread that is in the middle of something (running or runnable, or in
#: uninterruptible I/O); an idle backend thread waits on a condition variable (S).
_BUSY = ("R", "D")


def busy_threads(tasks: Path) -> list[int]:
    """The thread ids under ``tasks`` (``/proc/<pid>/task``) that are running or runnable now."""
    busy = []
    for stat in tasks.glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
        if state in _BUSY:
            busy.append(int(stat.parent.name))
    return busy


def wait_idle(tasks: Path, limit_s: float = 2.0) -> bool:
    """Wait until no thread under ``tasks`` is runnable; False if one still was after ``limit_s``
    (a server serving other clients all the while: the unload then goes ahead)."""
    deadline = time.monotonic() + limit_s
    while busy_threads(tasks):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True
