"""What `labkit room bench --swarm` reads differently from a room on one engine (labkit.room.bench).

- A lab runs on a worker: its memory is read through that worker's own engine (`--node-engine`), found as the
  node of the lab's Swarm task; without an engine for that node there is no figure (the bench says so).
- A grader runs as a Swarm service on a worker, one cold run per judged save (labkit.room.grader.swarm_runner):
  nothing warms up after a verdict, so the bench waits for none; its CPU is what each run read of its own
  container's cgroup and the board added up (labkit.room.board.progress's ``Cost``), since the workers'
  cgroups cannot be read from the manager's machine. The board itself is a process on the manager, read by pid.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..docker.engine_errors import ENGINE_ERRORS
from ..plumbing.downloads import say
from .hub import node_engines, swarm_nodes
from .protocol import ROOM_LABEL
from .settings import RoomSettings


@contextlib.contextmanager
def lab_on_its_node(manager: Any, settings: RoomSettings, user: str) -> Iterator[tuple[Any, str] | None]:
    """(the engine of the node that runs ``user``'s lab, its container's id), or None, said why: no
    `--node-engine` given for that node, or no container found there. The engines are closed after."""
    if not settings.node_engines:
        say("room bench: the labs run on the workers and no --node-engine reaches them: no lab memory figure")
        yield None
        return
    engines = node_engines.open_engines(manager, settings.node_engines)
    try:
        node_id = swarm_nodes.lab_tasks(manager, settings.room_id).get(user, "")
        engine = next((e for e in engines if e.node_id == node_id), None)
        if engine is None:
            say(
                f"room bench: no --node-engine reaches the node of {user}'s lab ({node_id or 'none'}): no memory figure"
            )
            yield None
            return
        labels = [f"{ROOM_LABEL}={settings.room_id}", f"{ROOM_LABEL}.user={user}"]
        try:
            found = engine.client.containers.list(filters={"label": labels})
        except ENGINE_ERRORS:
            found = []
        if not found:
            say(f"room bench: {user}'s lab has no running container on {engine.node}: no memory figure")
        yield (engine.client, found[0].id) if found else None
    finally:
        for engine in engines:
            engine.close()
