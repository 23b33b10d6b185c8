"""What the swarm tests share: `labkit` run on the swarm's manager (`labkit_cli`), a room that `room up --swarm`
started there (`SwarmRoom`), the room's services, a node's availability, and a gate in front of an engine's
socket for the tests that need a call to be in flight at a known moment (`EngineGate`):

    with EngineGate(swarm.manager.socket, tmp / "gate.sock") as gate:     # DOCKER_HOST=gate.url for the hub
        ...                                  # the hub spawns a lab: gate.held is set, the engine has not seen it
        gate.release()                       # the engine creates the service now
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from pathlib import Path

import requests
from swarm_support import Swarm

from labkit.room.protocol import ROOM_LABEL

LOGINS = ("p01", "p02")
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


def labkit_cli(swarm: Swarm, *args: str, check: bool = True, docker_host: str = "") -> str:
    """`labkit ...` run on the manager (in its namespace, its engine as DOCKER_HOST), as a teacher would."""
    env = dict(swarm.env(swarm.manager), DOCKER_HOST=docker_host or swarm.manager.url)
    done = swarm.run_in(swarm.manager, [sys.executable, "-m", "labkit.cli", *args], timeout=600, env=env)
    assert not check or done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class SwarmRoom:
    """A room that `room up --swarm` started on the manager, and HTTP to it from inside the manager's namespace."""

    def __init__(
        self,
        swarm: Swarm,
        directory: Path,
        port: int,
        participants: int = 2,
        image: str = "",
        engines: bool = True,
        docker_host: str = "",
    ) -> None:
        """``engines``: `--node-engine` for each worker (the images are checked, and copied, there);
        ``docker_host``: the manager's engine at another address (a gate in front of it)."""
        self.swarm, self.directory, self.docker_host = swarm, directory, docker_host
        up = [
            "room",
            "up",
            "--swarm",
            "--dir",
            str(directory),
            "--port",
            str(port),
            "--participants",
            str(participants),
        ]
        self.up_args = [*up, "--image", image or swarm.images[0]]  # by default the lab image every node holds
        self.up_args += [f"--node-engine={worker.url}" for worker in swarm.workers if engines]
        self.up()

    def up(self) -> None:
        """`room up` (again: a room whose hub died is recovered)."""
        labkit_cli(self.swarm, *self.up_args, docker_host=self.docker_host)
        self.record = json.loads((self.directory / "room.json").read_text())
        self.url = self.record["url"].rstrip("/")

    def request(self, method: str, path: str, token: str | None = None, **kw) -> requests.Response:
        headers = {"Authorization": f"token {token or self.record['teacher_token']}"}
        url = path if path.startswith("http") else f"{self.url}/{path}"
        return self.swarm.call_in(
            self.swarm.manager,
            lambda: requests.request(method, url, headers=headers, timeout=60, allow_redirects=False, **kw),
        )

    def ready(self, logins) -> bool:
        users = {u["name"]: u for u in self.request("GET", "hub/api/users").json()}
        return all((users[name].get("servers") or {}).get("", {}).get("ready") for name in logins)

    def down(self, *flags: str) -> str:
        return labkit_cli(
            self.swarm, "room", "down", "--dir", str(self.directory), *flags, docker_host=self.docker_host
        )


def lab_services(swarm: Swarm, room_id: str) -> list:
    """The room's labs: its services that carry a participant's label (its graders are services too)."""
    labels = [f"{ROOM_LABEL}={room_id}", f"{ROOM_LABEL}.user"]
    return swarm.client(swarm.manager).services.list(filters={"label": labels})


def set_availability(swarm: Swarm, node, availability: str) -> None:
    found = swarm.client(swarm.manager).nodes.get(swarm.node_ids[node.name])
    found.update({**found.attrs["Spec"], "Availability": availability})


def down_within(swarm: Swarm) -> float:
    """How long the manager takes to mark a silent node down: its dispatcher's heartbeat period (the swarm's
    spec) times swarmkit's grace multiplier (3), plus room for a busy machine."""
    period_ns = swarm.client(swarm.manager).swarm.attrs["Spec"]["Dispatcher"]["HeartbeatPeriod"]
    return 3 * period_ns / 1e9 + 30
