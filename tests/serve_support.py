"""`labkit serve` run as a person runs it, in a subprocess, for the tests that serve a repository."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from waiting_support import eventually

import labkit

LABKIT = [sys.executable, "-m", "labkit.cli"]


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


class Serve:
    """`labkit serve` in a subprocess: its stdout lines up to the `log` line, its stderr as it comes."""

    def __init__(self, *argv: str, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [*LABKIT, "serve", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
        )
        self.err: list[str] = []
        self._reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self._reader.start()
        self.lines = {}
        for line in self.proc.stdout:
            key, _, value = line.strip().partition(" ")
            self.lines[key] = value.strip()
            if key == "log":
                break

    def wait_for(self, text: str, timeout_s: float = 30) -> None:
        try:
            eventually(
                lambda: any(text in line for line in list(self.err)),
                f"{text!r} on the terminal",
                timeout_s,
                interval_s=0.1,
            )
        except AssertionError:
            raise AssertionError(f"{text!r} not on the terminal: {''.join(self.err)}") from None

    def stop(self, sig: int) -> str:
        self.proc.send_signal(sig)
        # Not communicate(): it would read stderr too, beside the reader thread, and close it under it.
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # where it waits, and what it said, for the failure
            py_spy = next(tool.path for tool in labkit.debug_tools() if tool.name == "py-spy")
            where = subprocess.run(
                [py_spy, "dump", "--nonblocking", "--pid", str(self.proc.pid)], capture_output=True, text=True
            )
            said = "".join(self.err[-40:])
            raise AssertionError(f"labkit serve did not stop:\n{where.stdout}{where.stderr}\n{said}") from None
        self._reader.join(timeout=10)  # the stderr reader's last lines
        assert self.proc.stdout is not None
        return self.proc.stdout.read()
