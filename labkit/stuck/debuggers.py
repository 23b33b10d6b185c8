"""The debugging tools labkit uses to show where a model is stuck, and whether they are there.

py-spy (PyPI ``py-spy``, a runtime dependency of labkit) reads the Python stack of a live stub;
eu-stack (Debian's ``elfutils``) reads the native stacks of Triton's threads for C++ backends.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

PY_SPY = "py-spy"
EU_STACK = "eu-stack"


@dataclass(frozen=True)
class Tool:
    """One tool: what it is for, where it was found (``path``, None if missing) and how to get it."""

    name: str
    purpose: str
    install: str
    path: str | None

    @property
    def found(self) -> bool:
        return self.path is not None

    def __str__(self) -> str:
        state = f"found at {self.path}" if self.found else f"MISSING: {self.install}"
        return f"{self.name}: {self.purpose}; {state}"


_PURPOSE = {
    PY_SPY: "the Python stack of a stuck model.py (Python models)",
    EU_STACK: "the native stack of a stuck C++ backend thread",
}
_INSTALL = {
    PY_SPY: "`pip install py-spy` into the lab's environment",
    EU_STACK: "`apt-get install elfutils` (Debian/Ubuntu) where Triton runs",
}


class Beside(Protocol):
    """Running tools where Triton runs (on this machine for the embedded server, in the container for
    Docker): what reading the live stack of a stuck model and signalling a stub need. Every runtime has it."""

    @property
    def triton_pid(self) -> int | None:
        """Triton's process id as tools beside it see it; its Python stubs share its process group."""
        ...

    def run_beside(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str, str]:
        """Run a tool where Triton runs: exit code, stdout, stderr. ``argv[0] == "python"`` is a Python 3 there."""
        ...

    def debug_tool(self, name: str) -> str | None:
        """Where a debugging tool (``py-spy``, ``eu-stack``) is, as run_beside sees it; None if missing."""
        ...

    def signal_beside(self, pid: int, sig: int) -> None:
        """Send a signal to a process beside Triton (a stub); one that already ended is fine."""
        ...

    def describe(self) -> str:
        """A short name for messages, e.g. "embedded" or "docker, labkit/tritonserver:23.12-cpu"."""
        ...


def host_tool(name: str) -> str | None:
    """A tool on this machine: beside this Python first (a venv's bin/ may not be on PATH), then PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def available(beside: Beside | None = None) -> list[Tool]:
    """Whether py-spy and eu-stack are available where ``beside`` runs Triton (a server's runtime) (default: this machine)."""
    found = beside.debug_tool if beside is not None else host_tool
    return [Tool(name, _PURPOSE[name], _INSTALL[name], found(name)) for name in (PY_SPY, EU_STACK)]


def missing_text(beside: Beside, name: str) -> str:
    """What to say instead of a stack when ``name`` is missing."""
    where = "on this machine" if beside.describe() == "embedded" else f"in the server ({beside.describe()})"
    return f"(labkit cannot show the stack: {name} is not available {where}; install it: {_INSTALL[name]})"
