"""A gate in front of a Docker engine's socket, for the swarm tests that need a call to be in flight at a known
moment: every byte passes through unchanged, except that a request whose head matches ``hold`` (by default the
creation of a Swarm service) waits at the gate until the test opens it.

    with EngineGate(swarm.manager.socket, tmp / "gate.sock") as gate:     # DOCKER_HOST=gate.url for the hub
        ...                                  # the hub spawns a lab: gate.held is set, the engine has not seen it
        gate.release()                       # the engine creates the service now
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

CREATE_SERVICE = b"/services/create"


class EngineGate:
    """A unix socket at ``path`` that forwards to the engine at ``engine``, holding matching requests."""

    def __init__(self, engine: Path, path: Path, hold: bytes = CREATE_SERVICE) -> None:
        self.engine, self.path, self.hold = engine, path, hold
        self.held = threading.Event()  # a request matched, and waits
        self.opened = threading.Event()
        self.seen: list[bytes] = []  # the first line of each request held
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True, name="engine gate").start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def release(self) -> None:
        self.opened.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(str(self.engine))
            self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(1 << 16):
                # a request's head comes in one piece (http.client sends it whole); bodies never name this path
                if requests and not self.opened.is_set() and chunk.startswith(b"POST ") and self.hold in chunk:
                    self.seen.append(chunk.split(b"\r\n", 1)[0])
                    self.held.set()
                    self.opened.wait()
                target.sendall(chunk)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.opened.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> EngineGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
