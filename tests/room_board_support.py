"""What the board's Docker tests share: the grader image, a room's volumes, and a participant's saves."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import docker.errors
import nbformat
import pytest
import requests
from ci_rules import skip_or_fail
from waiting_support import eventually, within

from labkit.course.exercises import REGISTRY
from labkit.docker import engine as lk_engine
from labkit.errors import SetupError
from labkit.plumbing.ports import free_ports
from labkit.room.hub.process import proxy_command
from labkit.room.k8s.board_container import service_environment
from labkit.room.protocol import ROOM_LABEL
from labkit.room.settings import BOARD_SCOPES, GRADER_IMAGE, PARTICIPANT_IMAGE, RoomSettings, volume_name

NOTEBOOK = "01_python_backend.ipynb"
NOTEBOOKS_DIR = os.path.join(os.path.dirname(__file__), "..", "notebooks")
# the participant image the tests build (LABKIT_ROOM_TEST_LAB: a tag of a development run's own) and the one the
# grader is built from; LABKIT_ROOM_TEST_BASE picks another (a development stand-in with labkit's requirements,
# which must exist), and then the grader gets a test tag of its own
LAB_TAG = os.environ.get("LABKIT_ROOM_TEST_LAB", PARTICIPANT_IMAGE)
BASE = os.environ.get("LABKIT_ROOM_TEST_BASE", LAB_TAG)
TAG = GRADER_IMAGE if BASE == PARTICIPANT_IMAGE else "labkit-test/grader:dev"
# a started but wrong 01-bad-request: it raises for a bad request, which fails every request of that execute
WRONG_BAD_REQUEST = """%%triton_python divide
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            if (b == 0).any():
                raise ValueError("INPUT1 holds a 0")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a / b)]))
        return responses
"""


HUB_CONFIG = """
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.command = {proxy!r}
c.JupyterHub.db_url = "sqlite:///{dir}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{dir}/cookie_secret"
c.JupyterHub.pid_file = "{dir}/hub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {users!r}
c.JupyterHub.api_tokens = {tokens!r}
c.JupyterHub.load_roles = [{{"name": "teacher", "users": ["teacher"],
                            "scopes": ["self", "access:services!service=board"]}},
                           {{"name": "board", "services": ["board"], "scopes": {scopes!r}}}]
c.JupyterHub.services = [{{"name": "board", "url": "http://127.0.0.1:{board_port}", "oauth_no_confirm": True,
                          "api_token": {board_token!r}}}]
"""


@contextlib.contextmanager
def board_hub(
    folder: Path,
    room_id: str,
    participants: list[str],
    tokens: dict[str, str],
    *,
    grader_image: str = GRADER_IMAGE,
    poll_s: float = 2,
):
    """A JupyterHub 6.1 on 127.0.0.1 (dummy logins; ``tokens``: {login: API token}, "teacher" among them) with
    the board as an external service, run with the very environment the Kubernetes values give it, for room
    ``room_id`` (its files in ``folder/room``); yields (the hub's url, the room folder). Stopped after."""
    try:
        proxy = proxy_command()
    except SetupError as exc:
        skip_or_fail(f"no configurable-http-proxy: {exc}")
    room_dir = folder / "room"
    room_dir.mkdir(exist_ok=True)
    board_token = "board-token-" + os.urandom(8).hex()
    port, hub_port, proxy_api, board_port = free_ports(4)
    command = [
        sys.executable,
        "-m",
        "labkit.room.board.service",
        "--room-dir",
        str(room_dir),
        "--room-id",
        room_id,
        "--participants",
        ",".join(participants),
        "--grader-image",
        grader_image,
        "--poll-s",
        str(poll_s),
    ]
    environment = {k: os.environ[k] for k in ("PATH", "HOME", "DOCKER_HOST") if k in os.environ}
    environment["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    environment.update(
        service_environment(f"http://127.0.0.1:{hub_port}/hub/api", f"http://127.0.0.1:{board_port}"),
        JUPYTERHUB_API_TOKEN=board_token,
    )
    (folder / "jupyterhub_config.py").write_text(
        HUB_CONFIG.format(
            port=port,
            hub_port=hub_port,
            proxy=list(proxy),
            proxy_api=proxy_api,
            board_port=board_port,
            dir=folder,
            users={"teacher", *participants},
            tokens={v: k for k, v in tokens.items()},
            scopes=list(BOARD_SCOPES),
            board_token=board_token,
        )
    )
    log = open(folder / "hub.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyterhub", "-f", str(folder / "jupyterhub_config.py")],
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    board = subprocess.Popen(command, env=environment, cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            if process.poll() is not None or board.poll() is not None:
                pytest.fail(f"the hub or its board exited:\n{(folder / 'hub.log').read_text()[-3000:]}")
            try:
                return (
                    requests.get(
                        f"{url}/services/board/api/progress",
                        timeout=5,
                        headers={"Authorization": f"token {tokens['teacher']}"},
                    ).status_code
                    == 200
                )
            except requests.ConnectionError:
                return False

        if not within(up, 120, "the hub and its board", interval_s=0.5):
            pytest.fail(f"the hub and its board did not come up:\n{(folder / 'hub.log').read_text()[-3000:]}")
        yield url, room_dir
    finally:
        for started in (board, process):
            started.send_signal(signal.SIGTERM)
            try:
                started.wait(60)
            except subprocess.TimeoutExpired:
                started.kill()
                started.wait()
        log.close()


def leftovers(engine, room_id: str) -> list[str]:
    """Whatever of room ``room_id`` is on the engine: containers, networks and volumes, by its labels and names."""
    from labkit.room.protocol import WORK_LABEL

    found = set()
    for label in (f"{ROOM_LABEL}={room_id}", f"{WORK_LABEL}={room_id}"):
        found |= {
            f"container {c.name}"
            for c in engine.containers.list(all=True, ignore_removed=True, filters={"label": label})
        }
        found |= {f"network {n.name}" for n in engine.networks.list(filters={"label": label})}
        found |= {f"volume {v.name}" for v in engine.volumes.list(filters={"label": label})}
    found |= {
        f"container {c.name}"
        for c in engine.containers.list(all=True, ignore_removed=True, filters={"name": f"labkit-{room_id}-"})
    }
    found |= {f"network {n.name}" for n in engine.networks.list(names=[f"labkit-room-{room_id}"])}
    found |= {f"volume {v.name}" for v in engine.volumes.list(filters={"name": f"labkit-room-{room_id}-"})}
    return sorted(found)


def room_engine():
    """A docker-py client with a long timeout (a vfs engine copies a whole image per container)."""
    ok, why = lk_engine.engine_status()
    if not ok:
        skip_or_fail(f"no Docker engine is reachable: {why}")
    return lk_engine.connect(timeout=600)


class RoomVolumes:
    """A test room's id and its participants' volumes; ``close()`` removes its containers and volumes."""

    def __init__(self, client, image: str) -> None:
        self.client = client
        self.id = f"t{uuid.uuid4().hex[:8]}"
        self.image = image
        self._lab = None  # a created (never started) container standing in for the participants' labs

    def volume(self, user: str) -> str:
        return volume_name(self.id, user)

    def save(self, user: str, nb: nbformat.NotebookNode, name: str = NOTEBOOK, folder: str = "") -> None:
        """Write a notebook into ``user``'s volume, owned by uid 1000, as their JupyterLab would save it."""
        name = f"{folder}/{name}" if folder else name
        if self.volume(user) not in {v.name for v in self.client.volumes.list()}:
            self.client.volumes.create(self.volume(user), labels={ROOM_LABEL: self.id})
        data = nbformat.writes(nb).encode()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if folder:
                info = tarfile.TarInfo(folder)
                info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, 0o755, 1000, 100, time.time()
                tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), 0o644, 1000, 100, time.time()
            tar.addfile(info, io.BytesIO(data))
        box = self.client.containers.create(
            self.image,
            "true",
            network_mode="none",
            labels={ROOM_LABEL: self.id},
            volumes={self.volume(user): {"bind": "/work", "mode": "rw"}},
        )
        try:
            box.put_archive("/work", buffer.getvalue())
        finally:
            box.remove(force=True, v=True)

    def close(self) -> None:
        def left() -> list:
            return self.client.containers.list(
                all=True, ignore_removed=True, filters={"label": f"{ROOM_LABEL}={self.id}"}
            )

        for container in left():
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:  # 409: a grader's own removal (in the background) is under way
                if exc.status_code != 409:
                    raise
        eventually(lambda: not left(), f"room {self.id}'s containers to be removed", 120, interval_s=0.5)
        for volume in self.client.volumes.list(filters={"name": f"labkit-room-{self.id}-"}):
            volume.remove(force=True)


def notebook(cells: dict[str, str] | None = None, name: str = NOTEBOOK) -> nbformat.NotebookNode:
    """Notebook ``name`` (01) as shipped, with the given exercise cells (by id, e.g. ``solution("01-output2")``)."""
    cells = cells or {}
    nb = nbformat.read(os.path.join(NOTEBOOKS_DIR, name), as_version=4)
    for cell in nb.cells:
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag.removeprefix("exercise:") in cells:
                cell.source = cells[tag.removeprefix("exercise:")]
    return nb


def solution(exercise: str) -> str:
    return REGISTRY[exercise].solution()


@dataclass
class Room:
    """A room that `room up` started (its settings, its room.json) and the requests a test makes of it: the
    hub's REST API as the teacher, a participant's Jupyter contents API with their token."""

    settings: RoomSettings
    record: dict
    started_s: float = 0.0  # from the three POSTs to three ready labs

    @property
    def url(self) -> str:
        return self.record["url"].rstrip("/")

    def api(self, method: str, path: str, token: str | None = None, **kw) -> requests.Response:
        headers = {"Authorization": f"token {token or self.record['teacher_token']}"}
        return requests.request(method, f"{self.url}/hub/api/{path}", headers=headers, timeout=60, **kw)

    def token_of(self, login: str) -> str:
        reply = self.api("POST", f"users/{login}/tokens", json={"expires_in": 3600, "note": "test"})
        assert reply.status_code == 201, reply.text
        return reply.json()["token"]

    def contents(self, login: str, token: str, path: str = "", method: str = "GET", **kw) -> requests.Response:
        return requests.request(
            method,
            f"{self.url}/user/{login}/api/contents/{path}",
            headers={"Authorization": f"token {token}"},
            timeout=60,
            allow_redirects=False,
            **kw,
        )


def container_of(engine, room: Room, login: str):
    """``login``'s lab container."""
    return engine.containers.get(f"{room.settings.prefix}-{login}")


def wait_ready(room: Room, logins, limit_s: float = 900) -> None:
    """Until the hub says every lab of ``logins`` is ready."""

    def ready() -> bool:
        users = {u["name"]: u for u in room.api("GET", "users").json()}
        return all((users[name].get("servers") or {}).get("", {}).get("ready") for name in logins)

    eventually(ready, f"labs {logins} to be ready (see {room.settings.directory / 'hub.log'})", limit_s, interval_s=1)
