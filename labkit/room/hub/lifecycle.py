"""`labkit room up | status | down`: the room's Docker network and work volumes, its hub, its files.

    info = up(RoomSettings(participants=RoomSettings.numbered(20)))   # the hub answers when this returns
    print(status_text(Path("room")))
    down(Path("room"), delete_work=False)

The room directory holds ``room.json`` (url, teacher_token, the hub's internal address, ...),
``participants.csv`` (login,password), ``jupyterhub_config.py``, ``processes/`` (the records of the hub, its
proxy, the board and the culler) and ``hub.log``. `room up` on a room whose hub died ends what that hub
left running first, by those records, and gives the new hub the old one's address, so that running labs
keep working. Containers and the network carry the label
``labkit.room=<room id>``; the work volumes (participants', and the teacher's with --teacher-lab)
``labkit.room.work=<room id>`` (kept by `room down`; `room down --delete-work` removes every volume of the room).
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import secrets
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlparse

import docker.client
import docker.errors
import docker.models.volumes

import docker

from ...docker.engine import connect
from ...docker.engine_errors import engine_error
from ...errors import EngineError, InvalidNameError, ServerStartError, SetupError, WaitTimeoutError
from ...plumbing.polling import wait_until
from ...plumbing.ports import free_ports, ports_taken
from .. import record as room_record
from ..hubclient import HubClient, default_server, lab_state
from ..protocol import ROOM_LABEL, WORK_LABEL
from ..record import RoomRecord
from ..settings import PARTICIPANT_IMAGE, RoomSettings
from . import node_engines, process as hub_process, swarm, swarm_nodes
from .hubconfig import Plumbing
from .lab_image import build_image, image_state

PARTICIPANTS_FILE = "participants.csv"
_LOGIN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")  # JupyterHub names, and part of container and volume names


@dataclass(frozen=True)
class RoomInfo:
    """What `room up` wrote into room.json."""

    url: str
    teacher_token: str
    room_id: str
    hub_pid: int
    seconds: float  # from the call to the hub answering
    recovered: tuple[str, ...] = ()  # what a hub that died had left running, ended first ("board (pid N)")
    replaced_labs: tuple[str, ...] = ()  # labs made for another hub address: removed, their work kept


def read_participants(path: Path) -> tuple[str, ...]:
    """Logins from a file: one per line, or the first column of a CSV (a header `login` is skipped)."""
    try:
        rows = list(csv.reader(path.read_text().splitlines()))
    except OSError as exc:
        raise SetupError(
            needed_by="The participants file",
            detail=exc.strerror or "",
            remedy="give an existing file",
            missing=str(path),
            reason="unreadable",
        ) from None
    logins = [row[0].strip().lower() for row in rows if row and row[0].strip() and not row[0].startswith("#")]
    if logins and logins[0] == "login":
        logins = logins[1:]
    for login in logins:
        if not _LOGIN.match(login):
            raise InvalidNameError(
                problem=f"in {path} cannot be a login",
                remedy="use lower-case letters, digits, '-' or '_' (at most 32, starting with a letter or digit)",
                name=login,
                what="participant login",
            )
    if len(set(logins)) != len(logins) or not logins:
        raise InvalidNameError(
            name=str(path),
            what="participants file",
            problem="names a participant twice, or none",
            remedy="name each participant once (and at least one)",
        )
    return tuple(logins)


def _previous(directory: Path) -> RoomRecord:
    """What an earlier `room up` of this directory recorded (empty when none, or unreadable)."""
    try:
        return room_record.read_if_any(directory) or RoomRecord()
    except SetupError:
        return RoomRecord()


def _secrets(old: RoomRecord) -> dict[str, str]:
    """The room's secrets: kept from an earlier `room up` of this directory (logins stay valid), else new."""
    return {
        "teacher_token": old.teacher_token or secrets.token_hex(32),
        "user_password": old.participant_password or secrets.token_urlsafe(9),
        "admin_password": old.teacher_password or secrets.token_urlsafe(32),
        "proxy_token": secrets.token_hex(32),
    }


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _network(client: docker.client.DockerClient, settings: RoomSettings) -> str:
    """The room's bridge network (created if missing); its gateway, where the labs reach the hub."""
    found = client.networks.list(names=[settings.network])
    network = (
        found[0]
        if found
        else client.networks.create(settings.network, driver="bridge", labels={ROOM_LABEL: settings.room_id})
    )
    network.reload()
    configs = (network.attrs.get("IPAM") or {}).get("Config") or []
    gateway = next((c.get("Gateway") for c in configs if c.get("Gateway")), None)
    if not gateway:
        raise EngineError(
            doing=f"give the Docker network {settings.network} a gateway address",
            remedy=f"remove it (`docker network rm {settings.network}`) and run `labkit room up` again",
        )
    return gateway


def _volumes(client: docker.client.DockerClient, settings: RoomSettings) -> None:
    """One work volume per participant (and the teacher, with a lab of their own), created up front so that
    it carries the room's work label: a volume DockerSpawner made itself would carry none."""
    have = {v.name for v in _room_volumes(client, settings.room_id)}  # an unlabelled older one is kept as it is
    logins = [*settings.participants, *([settings.teacher] if settings.teacher_lab else [])]
    for login in logins:
        name = settings.volume(login)
        if name not in have:
            client.volumes.create(name, labels={WORK_LABEL: settings.room_id, f"{ROOM_LABEL}.user": login})


def _room_volumes(client: docker.client.DockerClient, room_id: str) -> list[docker.models.volumes.Volume]:
    """Every volume of the room: by its labels, and by its name (``labkit-room-<id>-<login>``), which also
    finds one DockerSpawner made itself (a user the teacher added on the hub's admin page, an older teacher's lab)."""
    found = {}
    for filters in (
        {"label": f"{WORK_LABEL}={room_id}"},
        {"label": f"{ROOM_LABEL}={room_id}"},
        {"name": f"labkit-room-{room_id}-"},
    ):
        for volume in client.volumes.list(filters=filters):
            if "name" not in filters or volume.name.startswith(f"labkit-room-{room_id}-"):
                found[volume.name] = volume
    return [found[name] for name in sorted(found)]


def _ports(old: RoomRecord, gateway: str) -> tuple[int, int, int]:
    """The hub's internal port, its proxy's API port and the board's: the room's earlier ones while all are
    free and the network's gateway is the same (a lab keeps the hub address it was made with), else new."""
    wanted = (old.hub_port, old.proxy_api_port, old.board_port)
    if all(wanted) and old.hub_ip == gateway:
        hosts = (gateway, "127.0.0.1", "127.0.0.1")
        if not any(ports_taken([port], host) for port, host in zip(wanted, hosts)):
            return wanted
    hub_port, proxy_api_port, board_port = free_ports(3)
    return hub_port, proxy_api_port, board_port


def _replace_labs(client: docker.client.DockerClient, settings: RoomSettings, hub_at: str) -> list[str]:
    """Remove the room's lab containers made for a hub at another address than ``hub_at`` (host:port): such
    a lab cannot reach this hub, and would be started again as it is. Their work volumes stay; the hub
    finds them gone and starts a new lab at the participant's next visit."""
    labs = client.containers.list(
        all=True, ignore_removed=True, filters={"label": [f"{ROOM_LABEL}={settings.room_id}", f"{ROOM_LABEL}.user"]}
    )
    replaced = []
    for lab in labs:
        env = dict(line.split("=", 1) for line in lab.attrs["Config"].get("Env") or [] if "=" in line)
        if urlparse(env.get("JUPYTERHUB_API_URL", "")).netloc != hub_at:
            _remove(client, lab, kind="container")
            replaced.append(lab.name)
    return replaced


def _ensure_image(client: docker.client.DockerClient, settings: RoomSettings) -> None:
    """The labs' image: labkit's own is built when missing, and rebuilt (saying why) when labkit's package
    files, the notebooks or the recipe differ from the ones it was built from; a site's own must exist."""
    exists = image_state(settings.image, client) is not None
    if settings.image != PARTICIPANT_IMAGE:
        if exists:
            return
        raise SetupError(
            needed_by="The room",
            remedy=f"build or load it, or leave --image out to use labkit's own {PARTICIPANT_IMAGE}",
            missing=settings.image,
            reason="not built",
        )
    try:
        build_image(tag=settings.image)  # seconds when its recipe label matches this checkout
    except SetupError as exc:
        if not exists:
            raise
        print(
            f"labkit: cannot tell whether {settings.image} is current ({exc}); the room uses it as it is",
            file=sys.stderr,
        )


def _prepare(client: docker.client.DockerClient, settings: RoomSettings) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The address where the labs reach the hub, and with --swarm each participant's first node. On one
    engine: the image, the room's network (its gateway is that address) and the work volumes. On a swarm,
    Swarm makes each volume on its lab's node, and the image must be on the workers already."""
    if settings.swarm:
        return swarm.manager_address(client), swarm.placement(settings.participants, swarm.worker_nodes(client))
    _ensure_image(client, settings)
    gateway = _network(client, settings)
    _volumes(client, settings)
    return gateway, ()


def _swarm_images(client: docker.client.DockerClient, settings: RoomSettings, old: RoomRecord) -> tuple[str, ...]:
    """With --swarm: the labs' image (and the graders', when built here) copied into each worker whose engine
    `--node-engine` gives (else the ones an earlier `room up` of this room recorded, skipped when they do not
    answer: a node may be down while its hub restarts); the engines' URLs, for room.json."""
    given = bool(settings.node_engines)
    engines = node_engines.open_engines(client, settings.node_engines or old.node_engines, strict=given)
    try:
        node_engines.images_to_workers(client, engines, (settings.image,), optional=(settings.grader_image,))
    finally:
        for engine in engines:
            engine.close()
    return tuple(settings.node_engines or old.node_engines)


def up(settings: RoomSettings, *, timeout_s: float = 180) -> RoomInfo:
    """Start the room (see the module's docstring); returns once the hub answers."""
    t0 = time.perf_counter()
    directory = settings.directory.absolute()
    if hub_process.hub_pid(directory) is not None:
        raise ServerStartError(
            doing="Cannot start the room's hub",
            reason=f"a hub of this room already runs (pid {hub_process.hub_pid(directory)})",
            remedy=f"`labkit room down --dir {settings.directory}` first",
        )
    # a hub that died left its proxy (on the room's port), board and culler running: end them first
    recovered = hub_process.stop_hub(directory) if directory.is_dir() else []
    hub_process.check_port(settings.ip, settings.port)  # before anything is created for the room
    directory.mkdir(parents=True, exist_ok=True)
    old = _previous(directory)
    client = connect(timeout=900)
    try:
        gateway, placement = _prepare(client, settings)
        engines = _swarm_images(client, settings, old) if settings.swarm else ()
        hub_port, proxy_api_port, board_port = _ports(old, gateway)
        replaced = [] if settings.swarm else _replace_labs(client, settings, f"{gateway}:{hub_port}")
    except docker.errors.APIError as exc:
        raise engine_error(
            exc, "prepare the room", "Check the engine with `docker info`, then start the room again"
        ) from None
    finally:
        client.close()
    keys = _secrets(old)
    plumbing = Plumbing(
        hub_ip=gateway,
        hub_port=hub_port,
        proxy_api_port=proxy_api_port,
        board_port=board_port,
        proxy_command=hub_process.proxy_command(),
        python=sys.executable,
        placement=placement,
    )
    rows = ["login,password"] + [f"{login},{keys['user_password']}" for login in settings.participants]
    _write_private(directory / PARTICIPANTS_FILE, "\n".join(rows) + "\n")
    host = settings.ip if settings.ip not in ("", "0.0.0.0") else "127.0.0.1"
    record = RoomRecord(
        url=f"http://{host}:{settings.port}/",
        teacher_token=keys["teacher_token"],
        teacher=settings.teacher,
        teacher_password=keys["admin_password"],
        participant_password=keys["user_password"],
        room_id=settings.room_id,
        image=settings.image,
        grader_image=settings.grader_image,
        network=settings.network,
        participants=tuple(settings.participants),
        port=settings.port,
        teacher_lab=settings.teacher_lab,
        hub_ip=gateway,
        hub_port=hub_port,
        proxy_api_port=proxy_api_port,
        board_port=board_port,
        swarm=settings.swarm,
        node_engines=engines,
    )
    record.write(directory)  # the board reads it at its start
    pid = hub_process.start_hub(settings, plumbing, keys, timeout_s=timeout_s)
    record = replace(record, hub_pid=pid)
    record.write(directory)
    return RoomInfo(
        record.url,
        record.teacher_token,
        settings.room_id,
        pid,
        time.perf_counter() - t0,
        tuple(recovered),
        tuple(replaced),
    )


def status_rows(directory: Path) -> list[dict[str, str]]:
    """One row per participant: login, state (running, starting, stopping, stopped) and last activity; on a
    swarm, also ``node`` (as the teacher knows it) and ``why`` (what their node's state means for them)."""
    return _status(directory)[0]


def _status(directory: Path) -> tuple[list[dict[str, str]], dict[str, swarm_nodes.LabPlace]]:
    room = room_record.read(directory)
    hub_process.require_hub(directory)
    client = HubClient(room.url, room.teacher_token, timeout_s=30)
    try:
        users = client.call("hub/api/users")
    finally:
        client.close()
    rows = []
    for user in sorted(users, key=lambda u: u["name"]):
        if user["name"] == room.teacher:
            continue
        state = lab_state(default_server(user))
        rows.append({"login": user["name"], "state": state, "last_activity": user.get("last_activity") or "-"})
    found: dict[str, swarm_nodes.LabPlace] = {}
    if room.swarm:
        found = _places(room)
        for row in rows:
            place = found.get(row["login"])
            row["node"] = place.node if place else "-"
            row["why"] = place.why() if place else ""
    return rows, found


def _places(room: RoomRecord) -> dict[str, swarm_nodes.LabPlace]:
    """Each participant's node and its state: the hub's records (the teacher's token reads the spawners'
    state) and the swarm's manager (this engine)."""
    hub = HubClient(f"{room.url.rstrip('/')}/hub/api", room.teacher_token, timeout_s=30)
    client = connect(timeout=60)
    try:
        return swarm_nodes.read_places(hub, client, room.room_id)
    finally:
        hub.close()
        client.close()


def status_text(directory: Path) -> str:
    room = room_record.read(directory)
    rows, found = _status(directory)
    running = sum(r["state"] == "running" for r in rows)
    lines = [f"room {room.room_id} at {room.url}: {running} of {len(rows)} labs running"]
    lines += [f"  {r['login']:<12} {r['state']:<9} {r['last_activity']}{_on(r)}" for r in rows]
    return "\n".join(lines + [f"  {line}" for line in swarm_nodes.notes(found)])


def _on(row: dict[str, str]) -> str:
    on = f"  on {row['node']}" if row.get("node", "-") != "-" else ""
    return f"{on}: {row['why']}" if on and row.get("why") else on


def _remove(client: docker.client.DockerClient, thing: object, *, kind: str, wait_s: float = 300) -> bool:
    """Remove a container, network or volume; a container the engine is already removing (409: another
    `room down`, or a vfs engine still deleting its copy of the image) is waited for. False when it was gone."""
    try:
        if kind in ("network", "service", "config"):
            thing.remove()  # type: ignore[attr-defined]
        else:
            thing.remove(force=True)  # type: ignore[attr-defined]
        return True
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        if exc.status_code != 409 or kind != "container":
            raise

    def gone() -> bool:
        try:
            client.containers.get(thing.id)  # type: ignore[attr-defined]
        except docker.errors.NotFound:
            return True
        return False

    try:  # 409: removal in progress (vfs deletes a whole image copy)
        return wait_until(gone, wait_s, "a container's removal", interval_s=0.5)
    except WaitTimeoutError:
        pass
    raise EngineError(
        doing=f"finish removing {thing.name} within {wait_s:.0f} s",  # type: ignore[attr-defined]
        remedy="run `labkit room down` again",
        status_code=409,
    )


@dataclass(frozen=True)
class RoomDown:
    """What `room down` did: ``removed``, one line each; ``left``, with --delete-work on a swarm, the work
    volumes still on nodes whose engine it could not reach ({node: [volume, ...]})."""

    removed: list[str]
    left: dict[str, list[str]]


def down(directory: Path, *, delete_work: bool = False) -> list[str]:
    """Stop the hub and remove every container and network of the room (and its work volumes when
    ``delete_work``); what was removed, one line each."""
    return down_report(directory, delete_work=delete_work).removed


def _work_on_nodes(
    client: docker.client.DockerClient, directory: Path, room_id: str, urls: tuple[str, ...], recorded: tuple[str, ...]
) -> tuple[list[str], dict[str, list[str]]]:
    """A swarm's work volumes removed on its nodes, through their engines (see labkit.room.hub.node_engines)."""
    engines = node_engines.open_engines(client, urls or recorded, strict=bool(urls))
    try:
        return node_engines.work_volumes(client, engines, room_id, directory, _room_volumes)
    finally:
        for engine in engines:
            engine.close()


def down_report(directory: Path, *, delete_work: bool = False, engines: tuple[str, ...] = ()) -> RoomDown:
    """`down`, saying what stays: on a swarm with ``delete_work``, the volumes on the workers are removed
    through their engines (``engines``, else the ones `room up` recorded), and those it cannot reach listed."""
    directory = directory.absolute()
    try:
        record = room_record.read_if_any(directory) or RoomRecord()
    except SetupError:
        record = RoomRecord()
    room_id = record.room_id or RoomSettings(directory=directory).room_id
    left: dict[str, list[str]] = {}
    removed = hub_process.stop_hub(directory)  # the hub, and whatever of its processes still runs
    client = connect(timeout=300)
    label = {"label": f"{ROOM_LABEL}={room_id}"}
    rounds = []

    def swept() -> bool:
        """One sweep; true once a sweep after the first finds nothing (a container the engine was still
        creating for a stopped service shows up late)."""
        things = [
            (f"container {c.name}", c) for c in client.containers.list(all=True, ignore_removed=True, filters=label)
        ]
        things += [(f"network {n.name}", n) for n in client.networks.list(filters=label)]
        things = swarm.room_objects(client, room_id) + things  # a swarm's labs: services on its workers
        if delete_work:
            things += [(f"volume {v.name}", v) for v in _room_volumes(client, room_id)]
        for what, thing in things:
            if _remove(client, thing, kind=what.split()[0]) and what not in removed:
                removed.append(what)
        rounds.append(len(things))
        return len(rounds) > 1 and not things

    try:
        with contextlib.suppress(WaitTimeoutError):  # what keeps appearing: `room status` lists it, `down` again
            wait_until(swept, 5, "the room's containers, networks and volumes to be gone", interval_s=1.0)
        if delete_work and (record.swarm or engines):
            on_nodes, left = _work_on_nodes(client, directory, room_id, engines, record.node_engines)
            removed += on_nodes
    except docker.errors.APIError as exc:
        raise engine_error(exc, "remove part of the room", f"Run `labkit room down --dir {directory}` again") from None
    finally:
        client.close()
    return RoomDown(removed, left)
