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
    """A server that can say where a tool is, where Triton runs (TritonServer.debug_tool)."""

    def debug_tool(self, name: str) -> str | None: ...

    def describe(self) -> str: ...


def host_tool(name: str) -> str | None:
    """A tool on this machine: beside this Python first (a venv's bin/ may not be on PATH), then PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def debug_tools(server: Beside | None = None) -> list[Tool]:
    """Whether py-spy and eu-stack are available where ``server`` runs Triton (default: this machine)."""
    found = server.debug_tool if server is not None else host_tool
    return [Tool(name, _PURPOSE[name], _INSTALL[name], found(name)) for name in (PY_SPY, EU_STACK)]


def missing_text(server: Beside, name: str) -> str:
    """What to say instead of a stack when ``name`` is missing."""
    where = "on this machine" if server.describe() == "embedded" else f"in the server ({server.describe()})"
    return f"(labkit cannot show the stack: {name} is not available {where}; install it: {_INSTALL[name]})"
