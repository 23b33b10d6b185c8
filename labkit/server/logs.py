"""The server's log: a file on disk, with the tail viewable from a notebook."""

from __future__ import annotations

import html
import time
from pathlib import Path

# Triton prints these on every CPU-only start; they are noise, not problems.
_CPU_ONLY_NOISE = ("Failed to initialize NVML", "DCGM unable to start", "CUDA driver", "Unable to allocate pinned system memory")


class LogView:
    """Read access to a server's log file; ``mark()`` and ``since()`` cut out what one step logged."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def text(self) -> str:
        try:
            return self.path.read_text(errors="replace")
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
        deadline = time.monotonic() + limit_s
        size, since = self.mark(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.mark()
            if now != size:
                size, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return

    def since(self, mark: int) -> str:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(mark)
                return handle.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 20, hide_cpu_noise: bool = True) -> str:
        rows = self.text().splitlines()
        # A bad option makes Triton print its 380-line usage after the one line that matters.
        usage = next((i for i, r in enumerate(rows) if r.startswith("Usage: tritonserver")), None)
        if usage is not None:
            rows = rows[:usage]
        if hide_cpu_noise:
            rows = [r for r in rows if not any(n in r for n in _CPU_ONLY_NOISE)]
        return "\n".join(rows[-lines:])

    def grep(self, needle: str) -> list[str]:
        return [line for line in self.text().splitlines() if needle in line]

    def __repr__(self) -> str:
        return f"<LogView {self.path}>"

    def _repr_html_(self) -> str:
        return f"<pre style='max-height:20em;overflow:auto'>{html.escape(self.tail(40))}</pre>"
