"""`labkit room rehome --from NODE [--to NODE]`: a swarm node that never comes back (a machine gone for the
day): its participants' labs start on another worker, with the notebooks the board last saw restored in them.

    for line in rehome(Path("room"), "192.168.213.2"):   # NODE: host name, address or id, as `room status` prints it
        print(line)

Each participant's lab is pinned to the node holding their work volume (labkit.room.hub.swarmspawner); while
that node is down their lab cannot start. Here the hub starts it with ``{"rehome_to": <node id>}``, which the
spawner takes only while its own node is not ready; Swarm makes a new work volume there, the lab copies the
course's notebooks into it at its first start, and then each copy the board kept (labkit.room.board.copies)
is written through the lab's contents API, behind the hub's proxy. A file of the lab's own that is newer than
the copy, and not just the course's starter, is never overwritten: it is named as kept.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ...docker.engine import connect
from ...errors import HubError, RehomeError, SubmissionError, SwarmNodeError, WaitTimeoutError
from ...plumbing.polling import wait_until
from .. import record as room_record
from ..board import copies
from ..hubclient import HubClient, default_server, lab_state
from ..protocol import submission_of
from . import process as hub_process
from .swarm import describe
from .swarm_nodes import USABLE, LabPlace, node_state, read_places


def find_node(nodes: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The node ``name`` names: its id (or an unambiguous start of it), address, host name, or the words
    `room status` prints; SwarmNodeError "unknown" or "names several nodes"."""
    known = [describe(n) for n in nodes]
    matches = [
        n
        for n in nodes
        if name in (n["ID"], n["Status"].get("Addr"), n["Description"].get("Hostname"), describe(n))
        or (len(name) >= 6 and n["ID"].startswith(name))
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SwarmNodeError(
            node=name,
            problem="unknown",
            known=known,
            remedy="name it by host name, address or id, as `room status` does",
        )
    raise SwarmNodeError(
        node=name,
        problem="names several nodes",
        known=[describe(n) for n in matches],
        remedy="name it by its address or id (engines on one host share its name)",
    )


def pick(nodes: list[dict[str, Any]], source: str, target: str, found: dict[str, LabPlace]) -> tuple[dict, dict]:
    """(the node to empty, the node to move its participants to) as the teacher named them; without
    ``target``, the ready, active worker holding fewest labs. SwarmNodeError when that cannot be."""
    gone = find_node(nodes, source)
    if node_state(gone) == USABLE or gone["Status"]["State"] == "ready":
        raise SwarmNodeError(
            node=source,
            problem="still up",
            remedy="its participants' labs come back with it (a drained node: `docker node update --availability "
            "active`); to retire it, stop its engine (or `docker swarm leave` there) first, then rehome",
        )
    workers = [
        n for n in nodes if n["ID"] != gone["ID"] and n["Spec"].get("Role") == "worker" and node_state(n) == USABLE
    ]
    if target:
        chosen = find_node(nodes, target)
        if chosen not in workers:
            raise SwarmNodeError(
                node=target,
                problem="not a usable worker",
                known=[describe(n) for n in workers],
                remedy="name a ready, active worker other than the one being emptied",
            )
        return gone, chosen
    if not workers:
        raise SwarmNodeError(
            node=source,
            problem="no other worker",
            remedy="join a worker to the swarm (`docker swarm join-token worker` on the manager), then rehome again",
        )
    load = Counter(p.node_id for p in found.values())
    return gone, min(workers, key=lambda n: (load[n["ID"]], n["Status"].get("Addr", "")))


def rehome(directory: Path, source: str, target: str = "", timeout_s: float = 300) -> list[str]:
    """Move the participants of node ``source`` to ``target`` (see the module's docstring); what was done,
    one line per participant and per file restored or kept."""
    room = room_record.read(directory)
    hub_process.require_hub(directory)
    hub = HubClient(f"{room.url.rstrip('/')}/hub/api", room.teacher_token, timeout_s=60)
    client = connect(timeout=120)
    try:
        found = read_places(hub, client, room.room_id)
        nodes = [n.attrs for n in client.nodes.list()]
    finally:
        client.close()
    try:
        gone, chosen = pick(nodes, source, target, found)
        movers = sorted(p.login for p in found.values() if p.node_id == gone["ID"] and p.login != room.teacher)
        lines = [f"node {describe(gone)} is {node_state(gone)}: {len(movers)} participant(s) to {describe(chosen)}"]
        started, failed = [], []
        for login in movers:  # one participant's failure does not keep the others on the dead node
            try:
                _start_on(hub, login, chosen["ID"], timeout_s)
                started.append(login)
            except (HubError, WaitTimeoutError) as exc:
                failed.append(f"{login}: not moved: {exc}")
        for login in started:
            try:
                server = _wait_ready(hub, login, timeout_s)
                lines.append(f"{login}: lab started on {describe(chosen)}")
                lines += _restore(HubClient(room.url, room.teacher_token, 60), server, login, directory)
            except (HubError, SubmissionError) as exc:
                failed.append(f"{login}: moved, but its notebooks were not restored: {exc}")
        if failed:
            raise RehomeError(node=describe(gone), done=lines, failed=failed)
        return lines
    finally:
        hub.close()


def _server(hub: HubClient, login: str) -> dict[str, Any]:
    return default_server(hub.call(f"users/{login}") or {})


def _start_on(hub: HubClient, login: str, node_id: str, timeout_s: float) -> None:
    """Stop ``login``'s lab if the hub still counts it running (it polls its labs every few seconds), then
    start it on ``node_id``."""
    if lab_state(_server(hub, login)) != "stopped":
        try:
            hub.call(f"users/{login}/server", "DELETE")
        except HubError as exc:
            if exc.status_code != 400:  # 400: not running any more
                raise
        wait_until(
            lambda: lab_state(_server(hub, login)) == "stopped", timeout_s, f"{login}'s lab to stop", interval_s=1
        )
    hub.call(f"users/{login}/server", "POST", {"rehome_to": node_id})


def _wait_ready(hub: HubClient, login: str, timeout_s: float) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        server = _server(hub, login)
        if not server:
            raise HubError(
                url=f"{hub.url}/users/{login}",
                problem="has no lab: its start on the new node failed",
                remedy="read the hub's log (room/hub.log), then run `labkit room rehome` again",
            )
        return server if server.get("ready") else None

    try:
        return wait_until(ready, timeout_s, f"{login}'s lab on its new node", interval_s=1)
    except WaitTimeoutError:
        raise HubError(
            url=f"{hub.url}/users/{login}",
            problem=f"lab not ready within {timeout_s:.0f} s on its new node",
            remedy="check `labkit room status`, then run `labkit room rehome` again",
        ) from None


def _restore(lab: HubClient, server: dict[str, Any], login: str, directory: Path) -> list[str]:
    """Write each copy the board kept of ``login``'s notebooks into their lab, unless the lab's own file is newer
    (and not the course's starter)."""
    base = f"{lab.url}{server.get('url') or f'/user/{login}/'}api/contents/"
    lines = []
    try:
        for notebook, copy in copies.kept(directory, login).items():
            saved_at = copy.stat().st_mtime
            when = datetime.fromtimestamp(saved_at, UTC).strftime("%H:%M:%S UTC")
            if _lab_newer(lab, base, login, notebook, saved_at):
                lines.append(f"{login}: kept their lab's own {notebook}, newer than the copy saved at {when}")
                continue
            for depth in range(1, len(notebook.split("/"))):  # its folders first
                lab.call(base + quote("/".join(notebook.split("/")[:depth])), "PUT", {"type": "directory"})
            content = json.loads(copy.read_bytes())
            lab.call(base + quote(notebook), "PUT", {"type": "notebook", "format": "json", "content": content})
            lines.append(f"{login}: restored {notebook}, as the board last saw it (saved at {when})")
    finally:
        lab.close()
    return lines


def _lab_newer(lab: HubClient, base: str, login: str, notebook: str, saved_at: float) -> bool:
    try:
        model = lab.call(base + quote(notebook), params={"content": "1", "type": "notebook"})
    except HubError as exc:
        if exc.status_code == 404:
            return False
        if exc.status_code == 400:  # there, but not readable as a notebook: the participant's, left alone
            return True
        raise
    modified = datetime.fromisoformat(str(model.get("last_modified", "")).replace("Z", "+00:00")).timestamp()
    if modified <= saved_at:
        return False
    try:
        return not submission_of(login, notebook, model.get("content")).untouched
    except SubmissionError:
        return True  # not a notebook the course made: the participant's
