"""Breakpoints in model.py: relay the pdb session of a stub stopped at ``breakpoint()`` (or
``pdb.set_trace()``) to the person, in the cell whose request reached it or in ``labkit serve``'s terminal.

The stub side (``labkit/stub_side/labkit_stub.py``) listens on a unix socket in the server's
``backends/python/labkit-debug/`` only while a breakpoint waits, and writes ``<name>.json`` beside it
(where, which requests). A labkit call marks its request with an id made by ``request_id()``; the
wait for its answer (labkit.client.waiting) attaches when a stop names that id. ``labkit serve`` attaches to
any stop (``attach_any``). The socket path is a file in the work folder, so it also works across the
Docker bind mount.
"""

from __future__ import annotations

import builtins
import codecs
import json
import select
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .server.runtime import Workspace
from .stub_side import DEBUG_DIR

REQUEST_MARK = "labkit-debug-"  # labkit_stub.REQUEST_MARK, on the stub side
ATTACH_ANY = "attach-any"
PROMPT = "(Pdb) "


class _Served(Protocol):
    """What breakpoints read of a server: its work folders (the stubs write their stops there)."""

    @property
    def workspace(self) -> Workspace: ...


@dataclass(frozen=True)
class Stop:
    """A stub waiting at a breakpoint for someone to attach."""

    instance: str
    where: str  # "model.py:12"
    request_ids: tuple[str, ...]
    socket: Path


@dataclass(frozen=True)
class Session:
    """How a session ended: ``quit`` if the person quit (the request then fails), its length in seconds."""

    quit: bool
    seconds: float


def folder(server: _Served) -> Path:
    return server.workspace.backend_dir / "python" / DEBUG_DIR


def request_id() -> str:
    """A request id that lets a breakpoint in model.py wait for this caller to attach."""
    return f"{REQUEST_MARK}{uuid.uuid4().hex[:16]}"


def attach_any(server: _Served, on: bool = True) -> None:
    """Let breakpoints wait for requests from any client (``labkit serve`` watches them)."""
    flag = folder(server) / ATTACH_ANY
    if on:
        flag.parent.mkdir(parents=True, exist_ok=True)
        flag.touch()
    else:
        flag.unlink(missing_ok=True)


def stops(server: _Served, request: str | None = None) -> list[Stop]:
    """Stubs waiting at a breakpoint now: those stopped in ``request``, or all of them."""
    found = []
    for info in sorted(folder(server).glob("*.json")):
        try:
            data = json.loads(info.read_text())
        except (OSError, ValueError):
            continue  # being written or removed right now
        ids = tuple(data.get("request_ids") or ())
        if request is None or request in ids:
            found.append(Stop(data.get("instance", ""), data.get("where", ""), ids, info.parent / data["socket"]))
    return found


class Console:
    """The person's side: ``input`` and ``print`` (in a notebook, an input box under the cell)."""

    def __init__(self, read: Callable[[str], str] = builtins.input, write: Callable[[str], None] | None = None) -> None:
        self.read = read
        self.write = write or (lambda text: print(text, end="", flush=True))


def attach(stop: Stop, console: Console | None = None, done: Callable[[], bool] = lambda: False) -> Session:
    """Run the pdb session of ``stop`` until it continues, quits or the request is answered (``done``)."""
    console = console or Console()
    started = time.monotonic()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(stop.socket))
    except OSError:  # it gave up waiting a moment ago
        conn.close()
        return Session(False, 0.0)
    console.write(
        f"labkit: {stop.instance} stopped at a breakpoint ({stop.where}); pdb commands work here "
        f"(c continues the request, q fails it).\n"
    )
    last, pending = "", ""
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    try:
        while True:
            ready, _, _ = select.select([conn], [], [], 0.1)
            if not ready:
                if done():
                    break
                continue
            data = conn.recv(65536)
            if not data:
                break
            pending += decode(data)
            if pending.endswith(PROMPT) and not select.select([conn], [], [], 0.05)[0]:
                console.write(pending[: -len(PROMPT)])
                pending = ""
                last = _ask(console)
                try:
                    conn.sendall((last + "\n").encode())
                except OSError:  # the stub went on without us (it ended, or was unstuck)
                    break
            elif len(pending) > len(PROMPT):  # hold back what may be the start of a prompt
                console.write(pending[: -len(PROMPT)])
                pending = pending[-len(PROMPT) :]
    finally:
        conn.close()
    console.write(pending)
    return Session(last.strip() in ("q", "quit", "exit"), time.monotonic() - started)


def _ask(console: Console) -> str:
    try:
        return console.read(PROMPT)
    except (EOFError, OSError, NotImplementedError, RuntimeError):
        # No one can type here (stdin closed, a notebook run without input): let the request go on.
        console.write("labkit: no input here; continuing the request.\n")
        return "c"
