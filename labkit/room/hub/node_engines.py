"""The swarm's nodes' own engines (`labkit room up --swarm --node-engine URL`): Swarm carries services, not
images or volumes, so what the manager's engine cannot do on a worker is done through that worker's engine.

    engines = open_engines(manager, ("ssh://me@w1", "tcp://w2:2376"))   # each matched to its node by NodeID
    images_to_workers(manager, engines, ("labkit/lab:23.12-cpu",), optional=("labkit/grader:23.12-cpu",))
    left = work_volumes(manager, engines, room_id, directory, delete=True)   # `room down --delete-work`

An engine is matched to its node by the NodeID it reports itself (an engine that is no node of this swarm is
refused); room.json records the URLs, so that `room down` reaches the same engines. A worker with no engine
given cannot be checked or cleaned from here: labkit says which, and what to do instead.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...docker.engine import connect
from ...docker.engine_errors import ENGINE_ERRORS
from ...errors import SetupError, WaitTimeoutError
from ...plumbing.downloads import say
from ...plumbing.polling import wait_until
from ..protocol import ROOM_LABEL
from ..settings import volume_name
from . import node_images
from .swarm import describe

OPTION = "--node-engine"
URL_FORMS = "ssh://user@host, tcp://host:2376 or unix:///path, as DOCKER_HOST takes it"


@dataclass
class NodeEngine:
    """A node's own engine: the URL it was reached at, the node it is (by id, described) and a client."""

    url: str
    node_id: str
    node: str  # "w1 (192.168.213.2)"
    role: str  # worker | manager
    client: Any

    def close(self) -> None:
        with contextlib.suppress(*ENGINE_ERRORS):
            self.client.close()


def _nodes(manager: Any) -> dict[str, dict[str, Any]]:
    return {n.attrs["ID"]: n.attrs for n in manager.nodes.list()}


def open_engines(manager: Any, urls: Iterable[str], *, strict: bool = True) -> list[NodeEngine]:
    """The engines at ``urls``, each matched to its node of the swarm ``manager`` manages (one per node).
    ``strict`` (the URLs the teacher gave): SetupError naming a URL that does not answer or is not a node of
    this swarm; else (the URLs room.json recorded) such a URL is said and skipped."""
    nodes, found = _nodes(manager), dict[str, NodeEngine]()
    for url in dict.fromkeys(urls):
        try:
            client = connect(timeout=600, url=url)
            node_id = (client.info().get("Swarm") or {}).get("NodeID") or ""
        except (SetupError, *ENGINE_ERRORS) as exc:
            refused = SetupError(
                needed_by=f"`{OPTION} {url}`",
                missing=f"the Docker engine at {url}",
                reason="unreachable",
                detail=getattr(exc, "detail", "") or str(exc),
                remedy=f"Check the URL ({URL_FORMS}) and that the engine answers there: `DOCKER_HOST={url} docker info`",
            )
            if strict:
                raise refused from None
            say(f"{refused}; skipped")
            continue
        if node_id not in nodes:
            client.close()
            refused = SetupError(
                needed_by=f"`{OPTION} {url}`",
                missing=f"the engine at {url}",
                reason="not a node of this swarm",
                detail=f"that engine is {f'node {node_id} of another swarm' if node_id else 'in no swarm'}",
                remedy="give the engine of a node that `docker node ls` lists on the manager, or join that machine "
                "to this swarm first (`docker swarm join-token worker` on the manager says how)",
            )
            if strict:
                raise refused
            say(f"{refused}; skipped")
            continue
        node = nodes[node_id]
        found.setdefault(node_id, NodeEngine(url, node_id, describe(node), node["Spec"]["Role"], client))
    return list(found.values())


def _workers(manager: Any) -> list[dict[str, Any]]:
    return [n for n in _nodes(manager).values() if n["Spec"]["Role"] == "worker"]


def images_to_workers(
    manager: Any, engines: list[NodeEngine], images: Iterable[str], optional: Iterable[str] = ()
) -> list[str]:
    """Copy ``images`` (and those of ``optional`` that this engine holds) from the manager into every worker
    with an engine that lacks them (labkit.room.hub.node_images, with progress); what was copied where, one
    line each. The workers with no engine are named, with what to do."""
    targets = {e.node: e.client for e in engines if e.role == "worker"}
    have = {tag for tag in optional if node_images.holds(manager, tag, tag)}
    tags = [*images, *sorted(have)]
    copied = []
    if targets:
        for tag in sorted(set(optional) - have):
            say(f"{tag} is not on this engine: not copied to the workers (build it here first for graders there)")
        for tag in tags:
            copied += [f"{tag} to {node}" for node in node_images.copy_image(manager, tag, targets)]
        say(f"{', '.join(tags)}: on {', '.join(targets)}")
    unchecked = [describe(n) for n in _workers(manager) if describe(n) not in targets]
    if unchecked:
        say(
            f"could not check whether {', '.join(unchecked)} hold {', '.join(tags)}: no {OPTION} names their "
            f"engine. Give `{OPTION} URL` for each ({URL_FORMS}), or load the images there yourself "
            f"(`docker save {tags[0]} | ssh HOST docker load`); a lab on a worker without them fails at its start"
        )
    return copied


def hub_placements(directory: Path) -> dict[str, str]:
    """{login: node id} of every lab that ever started, from the hub's database (RoomSwarmSpawner keeps the node
    of each participant's work in its state); empty when there is no database."""
    path = Path(directory) / "jupyterhub.sqlite"
    if not path.exists():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = db.execute(
                "SELECT users.name, spawners.state FROM spawners JOIN users ON spawners.user_id = users.id"
            ).fetchall()
    except sqlite3.Error:
        return {}
    found = {}
    for login, state in rows:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            node = json.loads(state or "{}").get("node_id")
            if node:
                found[login] = node
    return found


def work_volumes(
    manager: Any,
    engines: list[NodeEngine],
    room_id: str,
    directory: Path,
    volumes_of: Callable[[Any, str], list[Any]],
) -> tuple[list[str], dict[str, list[str]]]:
    """`room down --delete-work` on the workers: every volume of the room (``volumes_of(client, room_id)``)
    removed through each node's engine, once that node's labs are gone; (what was removed, {node: volumes
    left there}) where a node has no engine here (found from the hub's record of where each lab ran)."""
    removed, label = [], {"label": f"{ROOM_LABEL}={room_id}"}
    for engine in engines:

        def no_lab(client: Any = engine.client) -> bool:
            return not client.containers.list(all=True, filters=label)

        with contextlib.suppress(WaitTimeoutError):  # a lab still stopping holds its volume: wait for it
            wait_until(no_lab, 120, "the labs", interval_s=1.0)
        for volume in volumes_of(engine.client, room_id):
            try:
                volume.remove(force=True)
                removed.append(f"volume {volume.name} on {engine.node}")
            except ENGINE_ERRORS as exc:
                if getattr(exc, "status_code", 0) != 404:
                    raise
    nodes = {n["ID"]: describe(n) for n in _workers(manager)}
    reached = {e.node_id for e in engines}
    left: dict[str, list[str]] = {}
    for login, node_id in sorted(hub_placements(directory).items()):
        if node_id not in reached:
            left.setdefault(nodes.get(node_id, f"node {node_id}"), []).append(volume_name(room_id, login))
    return removed, left
