"""Whether Triton still runs, and words for when it does not: the launch state, the crash watchdog,
requests in flight, and the one translation of "the server died" into an error."""

from __future__ import annotations

import sys
import threading
import time

from ..errors import ServerNotRunningError, WaitTimeoutError
from ..native.crash import Crash, read as read_crash
from ..plumbing.polling import wait_until
from .connection import unreachable
from .runtime import Runtime


class Health:
    """The life of one server's Triton, launch after launch. ``died`` is set (to the error) when the
    watchdog sees Triton die on its own; ``crash()`` says how a C++ backend brought it down."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.launched = False
        self.stopped = False
        self.died: ServerNotRunningError | None = None
        self.log_start = 0  # where this launch's part of the log begins
        self._in_flight: dict[str, int] = {}
        self._lock = threading.Lock()
        self._crash: tuple[str, Crash | None] | None = None  # (run_id, what the log says)
        self._watchdog: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self.launched and not self.stopped and self.runtime.running()

    # -- the watchdog ---------------------------------------------------------------------------------------

    def watch(self) -> None:
        self._watchdog = threading.Thread(target=self._watch, name="labkit-watchdog", daemon=True)
        self._watchdog.start()

    def unwatch(self) -> None:
        """Stop watching (an exit that is wanted must not be reported): the watchdog ends first."""
        self.stopped = True
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join()

    def relaunch(self) -> None:
        """Forget the launch that ended, before the next one."""
        with self._lock:
            self._in_flight.clear()
        self.stopped = False
        self.died = None

    def _watch(self) -> None:
        # Notice a crash within a fraction of a second, not at the next request: say so once.
        while not self.stopped:
            if not self.alive:
                if self.stopped:
                    return
                self.runtime.after_death()
                self.died = self.exited_error("Triton stopped unexpectedly")
                busy = ", ".join(sorted(m for m, n in self._in_flight.items() if n > 0))
                where = f"\n{self.died.crash}" if self.died.crash else ""
                print(
                    f"labkit: Triton ({self.runtime.kind}) exited: {self.runtime.exit_summary() or 'unknown reason'}"
                    f"{f'; requests to {busy} were in flight' if busy else ''}. "
                    f"Call .restart() to start it again with the same models.{where}",
                    file=sys.stderr,
                    flush=True,
                )
                return
            time.sleep(0.1)

    # -- requests in flight -----------------------------------------------------------------------------

    def track_request(self, model: str, delta: int) -> None:
        """Count requests in flight per model, so a crash report can name what was executing."""
        if delta < 0 and not self.alive:
            return  # keep the picture of the moment it died for the crash report
        with self._lock:
            self._in_flight[model] = self._in_flight.get(model, 0) + delta

    # -- a server that died -----------------------------------------------------------------------------

    def gone(self, within_s: float = 1.0) -> bool:
        """Whether the server has died; a failed connection may come just before the process is reaped."""
        try:
            return wait_until(lambda: not self.alive, within_s, "Triton to exit")
        except WaitTimeoutError:
            return False

    def exited_error(self, doing: str) -> ServerNotRunningError:
        """The error for an operation that failed because the server is gone: why, where a C++ backend
        crashed (its source lines) if one did, and the last log lines."""
        detail = self.runtime.exit_summary()
        tail = self.runtime.failure_tail()  # first: a container's last log lines are copied in by then
        report = str(self.crash() or "")
        return ServerNotRunningError(
            doing=doing,
            reason="the Triton server has exited",
            crash=report,
            exit_summary=detail,
            log_tail=tail,
            remedy="fix what stopped it and start a new server (lab.restart())",
        )

    def crash(self) -> Crash | None:
        """How a C++ backend brought the server down (signal, uncaught exception, source lines), read
        from this launch's log; None while it runs or when no backend crash is reported."""
        if self.alive:
            return None
        run_id = self.runtime.run_id
        if self._crash is None or self._crash[0] != run_id:
            logs = self.runtime.workspace.logs
            self._crash = (run_id, read_crash(logs.since(self.log_start), self.runtime.host_path))
        return self._crash[1]

    def dead_server_error(self, exc: BaseException, doing: str) -> ServerNotRunningError | None:
        """``exc`` (raised by a client call) explained as a stopped or dead server, or None while the
        server lives. The one place that decides "the server died"."""
        if self.stopped and self.died is None:
            return ServerNotRunningError(doing=doing, stopped=True)
        return self.exited_error(doing) if self.gone(1.0 if unreachable(exc) else 0.0) else None
