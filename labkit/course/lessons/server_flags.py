"""Lesson: the command line labkit gives Triton, read from the running process itself, each option beside
what the same binary's ``tritonserver --help`` says about it and why labkit sets it.

    for flag in server_flags.flags(lab):
        print(flag)
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import SetupError
from ...server.base import TritonServer

#: Why labkit sets each option (the options a person passes in ``extra_args`` have no entry).
WHY = {
    "--model-repository": "the lab's own repository folder (a temporary one unless you name one)",
    "--backend-directory": "labkit's folder: the wheel's Python backend, labkit's stub launcher, your "
    "Python-based backends",
    "--model-control-mode": "models load when a cell asks (lab.load, the magics), not all at start, and a "
    "model that fails to load leaves the others serving",
    "--disable-auto-complete-config": "a config serves as written: what Triton loads is the config you see",
    "--strict-readiness": "ready only while every loaded model is",
    "--http-address": "only this machine reaches the lab's server",
    "--grpc-address": "only this machine reaches the lab's server",
    "--metrics-address": "only this machine reaches the lab's server",
    "--http-port": "a free port: several servers (notebooks, tests) run side by side",
    "--grpc-port": "a free port: several servers (notebooks, tests) run side by side",
    "--metrics-port": "a free port: several servers (notebooks, tests) run side by side",
    "--allow-gpu-metrics": "on only where a GPU is visible",
    "--backend-config": "a shared-memory prefix per server: two servers with Python models on one machine "
    "must not share regions (python_backend README, r23.12, Running Multiple Instances of Triton Server)",
    "--log-verbose": "no verbose log (lab.config.log_verbose, or log_verbose= at start, raises it)",
    "--exit-timeout-secs": "stopping a lab's server waits at most 5 s for requests in flight",
}


@dataclass(frozen=True)
class Flag:
    """One option of Triton's command line: its name, labkit's value, what ``--help`` says, and why."""

    name: str
    value: str
    help_default: str  # the default ``--help`` states, or "" when it states none
    why: str

    def __str__(self) -> str:
        default = f"default {self.help_default}" if self.help_default else "no default stated"
        shown = f"{self.name}={self.value}" if self.value else self.name
        return f"{shown}  [--help: {default}]  labkit: {self.why}"


def command_line(server: TritonServer) -> list[str]:
    """The running Triton's own argv, read from /proc (a Triton on this machine only)."""
    pid = getattr(server.runtime, "triton_pid", None)
    if pid is None or not Path(f"/proc/{pid}/cmdline").exists():
        raise SetupError(
            needed_by="Reading Triton's command line (from /proc)",
            missing="a Triton process on this machine" if pid is None else f"/proc/{pid}/cmdline",
            reason="not an embedded server" if pid is None else "process gone",
            remedy="start an embedded server (labkit.start())",
        )
    return [part for part in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0") if part]


def help_text(server: TritonServer) -> str:
    """``tritonserver --help`` of the very binary that runs, in the environment it runs in."""
    argv = command_line(server)
    pid = getattr(server.runtime, "triton_pid", None)
    environ = dict(
        item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in item
    )
    done = subprocess.run([argv[0], "--help"], capture_output=True, text=True, env=environ, timeout=30)
    return done.stdout + done.stderr


def _default(help_text: str, name: str) -> str:
    """The default ``--help`` states for option ``name``: its paragraph's "Default is ..." or "The default is ..."."""
    paragraph = re.search(rf"^\s+{re.escape(name)}\b[^\n]*\n((?:\t[^\n]*\n?)+)", help_text, re.M)
    if paragraph is None:
        return ""
    text = " ".join(paragraph.group(1).split())
    found = re.search(r"(?:The default is|Default is) (.+?)(?:\.(?:\s|$)|$)", text)
    return found.group(1).strip().strip("'\"") if found else ""


def flags(server: TritonServer) -> list[Flag]:
    """Every option on the running Triton's command line but the binary itself."""
    text = help_text(server)
    found = []
    for part in command_line(server)[1:]:
        name, _, value = part.partition("=")
        default = _default(text, name) if value else "off (a switch, on when given)"
        found.append(Flag(name, value, default, WHY.get(name, "given by you (extra_args)")))
    return found
