"""Wait until Triton's threads are idle before a model is unloaded or replaced (a Triton 2.41 race).

When a model is unloaded (or replaced by a reload), Triton deletes it in a thread of its own;
``TritonModelInstance::TritonBackendThread::StopBackendThread()`` then reads ``model_instances_.back()``
of each instance's backend thread, unlocked. While a backend thread runs a payload that names its
instance (the init and the warm-up of a load) that deque is empty, until the thread puts the instance
back after the payload. Triton answers the load before that, so an unload sent right after can read
the empty deque: ``back()`` then follows a map slot that holds no node and the server dies with
SIGSEGV (a core dump here: a read at 0x1f8 in StopBackendThread, from ~TritonModelInstance in the
model deleter's thread; about one unload in a hundred right after a load on a busy two-core machine,
the intermittent crash of tests/test_bad_backends.py's finalize test). Putting the instance back
takes a few instructions unless the backend thread is preempted there, and a preempted thread is
runnable: so labkit waits until no thread of the Triton process is runnable before it asks for an
unload or a reload.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import WaitTimeoutError
from ..plumbing.polling import wait_until

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
    try:
        return wait_until(lambda: not busy_threads(tasks), limit_s, "the server's threads to be idle", interval_s=0.002)
    except WaitTimeoutError:
        return False
