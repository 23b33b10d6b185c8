"""A separate, low-priority process that turns dashboard data into PNGs.

Drawing a dashboard costs ~0.2 s of Python; in the notebook's own process it would hold the GIL
against the load generator's threads. At nice 19 in its own process it only uses idle CPU.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from multiprocessing.connection import Connection

from .plots import DashboardData


def _serve(conn: Connection, parent_pid: int) -> None:
    from .server._process import _die_with_parent

    _die_with_parent(parent_pid)
    os.nice(19)
    from . import plots

    while True:
        try:
            data = conn.recv()
        except EOFError:
            return
        if data is None:
            return
        try:
            conn.send(plots.png(plots.dashboard_figure(data)))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which shows it
            conn.send(exc)


class Renderer:
    """One renderer process; ``render`` blocks until the PNG is back. Close it when done."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")  # forking a threaded kernel process is unsafe
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, os.getpid()), daemon=True, name="labkit-render")
        self._proc.start()
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
