"""Which swarm node holds each participant's lab and work, and what state that node is in: the one answer that
`labkit room status`, the board (its page, and its restarts of labs whose node came back) and `labkit room
rehome` share.

    users = hub.call("hub/api/users", params={"include_stopped_servers": "1"})   # with admin:server_state
    found = places(users, [n.attrs for n in client.nodes.list()], lab_tasks(client, room_id))
    found["p01"].node_state      # "ready", "drained", "paused", "down" or "gone"

A participant's node comes from their spawner's state (the hub's database: labkit.room.hub.swarmspawner keeps it
after the lab stops, since the work volume stays there), else from the task of a lab still starting. The
spawner's state also says when a lab ended because its node went (``lost``): those are the labs to bring back
when the node returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...docker.engine_errors import ENGINE_ERRORS, engine_error
from ...errors import HubError
from ..hubclient import HubClient, default_server, lab_state
from ..protocol import ROOM_LABEL
from .swarm import describe

USABLE = "ready"  # a node's state in which labs run on it


@dataclass(frozen=True)
class LabPlace:
    """Where ``login``'s lab and work are: ``node`` as `room status` prints it (host name and address, or the id
    of a node the swarm no longer knows), its ``node_state``, the lab's state (running, starting, stopping,
    stopped) and ``lost``: why the lab ended with its node ("down", "drained"), "" when it did not."""

    login: str
    node_id: str
    node: str
    node_state: str
    lab: str
    lost: str = ""

    @property
    def affected(self) -> bool:
        """The node cannot run this lab now: it is drained, down or gone."""
        return bool(self.node_id) and self.node_state != USABLE

    @property
    def to_restart(self) -> bool:
        """The lab ended with its node, the node is back, and the lab is not running: start it again there."""
        return bool(self.lost) and self.node_state == USABLE and self.lab == "stopped"

    def why(self) -> str:
        """The teacher's words for an affected participant ("" when not affected)."""
        if self.node_state == USABLE:
            return "lab ended with its node, which is back: starting it again" if self.to_restart else ""
        if not self.node_id:
            return ""
        state = {"drained": "drained", "paused": "paused", "down": "down", "gone": "gone from the swarm"}
        words = f"node {state.get(self.node_state, self.node_state)}"
        if self.lab == "stopped" and self.lost:
            return f"{words}: lab stopped, their work is on the node; it comes back when the node returns"
        return f"{words}: their work is on the node; the lab cannot start until it returns"


def node_state(node: dict[str, Any] | None) -> str:
    """A node's state as the teacher reads it: down before drained (a dead machine is not coming back by an
    `availability active`), "gone" when the swarm no longer lists it."""
    if node is None:
        return "gone"
    if node["Status"]["State"] != "ready":
        return "down"
    availability = node["Spec"].get("Availability", "active")
    return {"drain": "drained", "pause": "paused"}.get(availability, USABLE)


def places(users: list[dict[str, Any]], nodes: list[dict[str, Any]], tasks: dict[str, str]) -> dict[str, LabPlace]:
    """{login: LabPlace} of every user with a node: from the hub's users (``include_stopped_servers``, each
    server's ``state``), the swarm's nodes (their attrs) and ``tasks`` ({login: node id} of the room's labs with a
    task placed, for a lab whose start the hub has not recorded yet)."""
    by_id = {n["ID"]: n for n in nodes}
    found = {}
    for user in users:
        server = default_server(user)
        state = server.get("state") or {}
        node_id = state.get("node_id") or tasks.get(user["name"], "")
        if not node_id:
            continue
        node = by_id.get(node_id)
        found[user["name"]] = LabPlace(
            login=user["name"],
            node_id=node_id,
            node=describe(node) if node else node_id,
            node_state=node_state(node),
            lab=lab_state(server),
            lost=state.get("lost_with_node", ""),
        )
    return found


def lab_tasks(client: Any, room_id: str) -> dict[str, str]:
    """{login: node id} of the room's lab services with a task meant to run on a node."""
    found = {}
    for service in client.services.list(filters={"label": f"{ROOM_LABEL}={room_id}"}):
        login = service.attrs["Spec"].get("Labels", {}).get(f"{ROOM_LABEL}.user")
        tasks = [t for t in service.tasks(filters={"desired-state": "running"}) if t.get("NodeID")]
        if login and tasks:
            found[login] = tasks[0]["NodeID"]
    return found


def read_places(hub: HubClient, client: Any, room_id: str) -> dict[str, LabPlace]:
    """places() of the room, asked now: the hub through ``hub`` (a token with ``admin:server_state``; its base
    the hub's API, e.g. http://127.0.0.1:8000/hub/api) and the swarm through ``client``, the manager's engine.
    HubError when the hub does not answer; EngineError when the engine does not."""
    users = hub.call("users", params={"include_stopped_servers": "1"})
    if not isinstance(users, list):
        raise HubError(url=f"{hub.url}/users", problem="did not answer a list of users", remedy="read the hub's log")
    try:
        nodes = [n.attrs for n in client.nodes.list()]
        tasks = lab_tasks(client, room_id)
    except ENGINE_ERRORS as exc:
        raise engine_error(exc, "list the swarm's nodes and the room's labs", "Check the manager's engine") from None
    return places(users, nodes, tasks)


def notes(found: dict[str, LabPlace]) -> list[str]:
    """One line per node that holds affected participants: who waits for it, and what the teacher can do."""
    by_node: dict[tuple[str, str, str], list[str]] = {}
    for place in sorted(found.values(), key=lambda p: p.login):
        if place.affected:
            by_node.setdefault((place.node, place.node_id, place.node_state), []).append(place.login)
    lines = []
    for (node, node_id, state), logins in sorted(by_node.items()):
        who = ", ".join(logins)
        if state in ("drained", "paused"):
            lines.append(
                f"node {node} is {state}: {who} wait for it; `docker node update --availability active {node_id}` "
                "brings their labs back there, with their work"
            )
        else:
            address = node.rsplit("(", 1)[-1].rstrip(")") if "(" in node else node
            lines.append(
                f"node {node} is {state}: {who} wait for it (their labs come back when it returns); if it never "
                f"does, `labkit room rehome --from {address}` starts them on another worker with the notebooks "
                "the board last saw"
            )
    return lines
