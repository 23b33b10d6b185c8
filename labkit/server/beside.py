"""Running tools where Triton runs (here for the embedded server, in the container for Docker):
what labkit needs to read the live stack of a stuck model and to signal a stuck Python stub.

TritonServer inherits Beside; a launcher that runs Triton elsewhere overrides the four members.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ..stuck.tools import host_tool


class Beside:
    """Tools beside Triton: by default on this machine, with Triton as a child process of ours."""

    @property
    def triton_pid(self) -> int | None:
        """Triton's process id as tools beside it see it; its Python stubs share its process group."""
        return None

    def run_beside(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str, str]:
        """Run a tool where Triton runs: exit code, stdout, stderr. ``argv[0] == "python"`` is a Python 3 there."""
        argv = [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return 124, "", f"{argv[0]} did not finish within {timeout_s:.0f} s"
        except OSError as exc:
            return 127, "", f"could not run {argv[0]}: {exc}"
        return proc.returncode, proc.stdout, proc.stderr

    def debug_tool(self, name: str) -> str | None:
        """Where a debugging tool (``py-spy``, ``eu-stack``) is, as run_beside sees it; None if missing."""
        return host_tool(name)

    def signal_beside(self, pid: int, sig: int) -> None:
        """Send a signal to a process beside Triton (a stub); one that already ended is fine."""
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
