"""The server's log: a file on disk, with the tail viewable from a notebook."""

from __future__ import annotations

import html
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import WaitTimeoutError
from ..plumbing.polling import wait_until

# Triton prints these on every CPU-only start; they are noise, not problems.
_CPU_ONLY_NOISE = (
    "Failed to initialize NVML",
    "DCGM unable to start",
    "CUDA driver",
    "Unable to allocate pinned system memory",
)


#: Where one of Triton's log lines starts inside another: its level letter, date, time, thread and file:line.
_GLUED = re.compile(r"(?<=[^\n])(?=[IWE]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^\s\]]+:\d+\] )")


def separated(text: str) -> str:
    """Triton's log with every line of its own on a line of its own. tritonserver and libtritonserver each
    keep a logger with a lock of its own (common/src/logging.cc r23.12, Logger::Log writes the message, then
    std::endl), so a line of one can land between the other's message and its newline: that line is cut out
    onto a line of its own (its partner's newline then leaves an empty line)."""
    return _GLUED.sub("\n", text)


def is_cpu_noise(line: str) -> bool:
    """A line Triton prints on every CPU-only start (no GPU, no driver): not a problem."""
    return any(n in line for n in _CPU_ONLY_NOISE)


class LogView:
    """Read access to a server's log file; ``mark()`` and ``since()`` cut out what one step logged."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def text(self) -> str:
        try:
            return separated(self.path.read_text(errors="replace"))
        except FileNotFoundError:
            return ""

    def mark(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def settle(self, quiet_s: float = 0.15, limit_s: float = 2.0) -> None:
        """Wait until the log stops growing (quiet for ``quiet_s``, at most ``limit_s``): what a process
        prints about a failure can arrive just after the failure's answer."""
        size, since = self.mark(), time.monotonic()

        def quiet() -> bool:
            nonlocal size, since
            now = self.mark()
            if now != size:
                size, since = now, time.monotonic()
                return False
            return time.monotonic() - since >= quiet_s

        try:
            wait_until(quiet, limit_s, f"{self.path.name} to stop growing")
        except WaitTimeoutError:
            pass  # still growing: what it holds now is what there is

    def since(self, mark: int) -> str:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(mark)
                return separated(handle.read().decode(errors="replace"))
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 20, hide_cpu_noise: bool = True) -> str:
        rows = self.text().splitlines()
        # A bad option makes Triton print its 380-line usage after the one line that matters.
        usage = next((i for i, r in enumerate(rows) if r.startswith("Usage: tritonserver")), None)
        if usage is not None:
            rows = rows[:usage]
        if hide_cpu_noise:
            rows = [r for r in rows if not is_cpu_noise(r)]
        return "\n".join(rows[-lines:])

    def grep(self, needle: str) -> list[str]:
        return [line for line in self.text().splitlines() if needle in line]

    def __repr__(self) -> str:
        return f"<LogView {self.path}>"

    def _repr_html_(self) -> str:
        return f"<pre style='max-height:20em;overflow:auto'>{html.escape(self.tail(40))}</pre>"


class LogFollower:
    """Hands each new line of a log to ``write`` as it comes (what ``tail -f`` shows), from a thread of
    its own, CPU-only noise left out. ``labkit serve`` shows Triton's and the models' lines with it."""

    def __init__(self, view: LogView, write: Callable[[str], None], interval_s: float = 0.1) -> None:
        self.view = view
        self.write = write
        self.interval_s = interval_s
        self._offset = view.mark()
        self._partial = b""
        self._stop = threading.Event()
        self._lock = threading.Lock()  # held while paused, and while a batch of lines is written
        self._thread = threading.Thread(target=self._run, name="labkit-log-follower", daemon=True)

    def start(self) -> LogFollower:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.pump()

    def pump(self, final: bool = False) -> None:
        """Write what the log gained since the last call (``final``: a last line without its newline too)."""
        with self._lock:
            try:
                with open(self.view.path, "rb") as handle:
                    handle.seek(self._offset)
                    data = handle.read()
            except FileNotFoundError:
                return
            self._offset += len(data)
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()
            if final and self._partial:
                lines, self._partial = [*lines, self._partial], b""
            for raw in lines:
                for line in separated(raw.decode(errors="replace").rstrip("\r")).split("\n"):
                    if line and not is_cpu_noise(line):
                        self.write(line)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No lines while inside (e.g. while pdb talks in the same terminal); they come after."""
        with self._lock:
            yield

    def stop(self) -> None:
        """Stop following, after writing whatever the log holds now."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.pump(final=True)
