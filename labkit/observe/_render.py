"""A separate, low-priority process that turns dashboard data into PNGs.

Drawing a dashboard frame costs ~0.15 s of Python; in the notebook's own process it would hold the GIL
against the load generator. In its own process, scheduled as SCHED_IDLE, it only uses idle CPU.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
from multiprocessing.connection import Connection

from .plots import DashboardData


def _serve(conn: Connection, parent_pid: int) -> None:
    from ..plumbing.process_groups import die_with_parent

    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a kernel interrupt is for the kernel, not for drawing
    from .dashboard_canvas import DashboardCanvas

    canvas = DashboardCanvas()
    while True:
        try:
            data = conn.recv()
        except EOFError:
            return
        if data is None:
            return
        try:
            conn.send(canvas.render(data))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which shows it
            conn.send(exc)


class Renderer:
    """One renderer process; ``render`` blocks until the PNG is back. Close it when done.

    Starting one (a new Python importing matplotlib and labkit) slows a load running at that moment by
    a fifth for a second or two, even at idle priority; dashboards therefore share one (``shared()``).
    """

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")  # forking a threaded kernel process is unsafe
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, os.getpid()), daemon=True, name="labkit-render")
        self._proc.start()
        # SCHED_IDLE: it runs only on CPU time nothing else wants (nice 19 measurably slowed a load).
        if self._proc.pid is not None:  # always set once start() returns
            os.sched_setscheduler(self._proc.pid, os.SCHED_IDLE, os.sched_param(0))
        child.close()
        self._lock = threading.Lock()

    def render(self, data: DashboardData) -> bytes:
        with self._lock:
            self._conn.send(data)
            answer = self._conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._conn.close()
        self._proc.join(timeout=5)
        if self._proc.is_alive():
            self._proc.kill()

    @property
    def alive(self) -> bool:
        return self._proc.is_alive()


_shared: Renderer | None = None
_shared_lock = threading.Lock()


def shared() -> Renderer:
    """The process's renderer, started on first use and kept (it ends with this process)."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive:
            _shared = Renderer()
        return _shared
