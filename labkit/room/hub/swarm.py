"""`room up --swarm`'s view of the swarm, through its manager's engine: the workers, where each participant's
lab goes first, which node each lab runs on, and the room's services and configs for `room down`.

    address = manager_address(client)                 # SetupError when this engine manages no swarm
    plan = placement(settings.participants, worker_nodes(client))

The labs themselves are made by labkit.room.hub.swarmspawner, in the hub.
"""

from __future__ import annotations

from typing import Any

from ...errors import SetupError
from ..protocol import ROOM_LABEL


def manager_address(client: Any) -> str:
    """The address this engine's swarm node is reached at (the labs reach the hub there); SetupError when the
    engine is not a manager of an active swarm."""
    swarm = client.info().get("Swarm") or {}
    if swarm.get("LocalNodeState") != "active" or not swarm.get("ControlAvailable"):
        what = "a worker of a swarm" if swarm.get("LocalNodeState") == "active" else "in no swarm"
        raise SetupError(
            needed_by="`labkit room up --swarm`",
            missing="Docker swarm manager",
            reason="not a manager",
            detail=f"this engine is {what}",
            remedy="Run it on the manager (or point DOCKER_HOST at the manager's engine); for a new swarm, "
            "`docker swarm init` on the machine that holds the hub and `docker swarm join` on the others",
        )
    return str(swarm.get("NodeAddr") or "")


def describe(node: dict[str, Any]) -> str:
    """A node as the teacher knows it: its host name and address (two engines on one host share a name)."""
    return f"{node['Description']['Hostname']} ({node['Status']['Addr']})"


def worker_nodes(client: Any) -> list[dict[str, Any]]:
    """The workers that take labs (ready, active), by address; SetupError when there is none."""
    nodes = [
        n.attrs
        for n in client.nodes.list(filters={"role": "worker"})
        if n.attrs["Status"]["State"] == "ready" and n.attrs["Spec"].get("Availability") == "active"
    ]
    if not nodes:
        raise SetupError(
            needed_by="the swarm's labs",
            missing="Docker swarm worker",
            reason="no worker",
            detail="no node of the swarm is a ready, active worker",
            remedy="Join one (`docker swarm join-token worker` on the manager says how), or make one active "
            "(`docker node update --availability active NODE`)",
        )
    return sorted(nodes, key=lambda n: tuple(int(p) if p.isdigit() else 0 for p in n["Status"]["Addr"].split(".")))


def placement(logins: tuple[str, ...], workers: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(login, node id) of each participant's first start, in turn over the workers. A lab that started once
    goes back to its node whatever this says (the spawner keeps it: the work volume is there)."""
    return tuple((login, workers[i % len(workers)]["ID"]) for i, login in enumerate(logins))


def room_objects(client: Any, room_id: str) -> list[tuple[str, Any]]:
    """("service NAME", service) and ("config NAME", config) of the room, when the engine manages a swarm."""
    swarm = client.info().get("Swarm") or {}
    if not swarm.get("ControlAvailable"):
        return []
    label = {"label": f"{ROOM_LABEL}={room_id}"}
    things = [(f"service {s.name}", s) for s in client.services.list(filters=label)]
    things += [(f"config {c.name}", c) for c in client.configs.list(filters=label)]
    return things
