"""The room's containers found by their labels (labkit.room.protocol's ROOM_LABEL and ROLE_LABEL) and removed:
the board's graders and its scanner, when they are done or the board stops."""

from __future__ import annotations

import logging
from typing import Any

import docker.errors

from ..docker.engine_errors import ENGINE_ERRORS
from .protocol import ROLE_LABEL, ROOM_LABEL

log = logging.getLogger("labkit.room.grader")  # as the grader's own warnings


def remove_containers(client: Any, room_id: str, role: str) -> None:
    """Remove room ``room_id``'s containers of ``role`` ("grader", "scan"); a warning when the engine
    refuses (`labkit room down` removes them later)."""
    try:
        for container in client.containers.list(
            all=True, ignore_removed=True, filters={"label": [f"{ROOM_LABEL}={room_id}", f"{ROLE_LABEL}={role}"]}
        ):
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass  # removed meanwhile (a judged grader goes in the background)
    except ENGINE_ERRORS as exc:
        log.warning("could not remove the room's %s containers (%s); `labkit room down` does", role, exc)
