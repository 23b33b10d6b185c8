"""``room.json``: what `labkit room up` wrote about its room (the hub's address, the teacher's token, the
logins, the images), read and written here only. The file holds tokens: it is written for its owner alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..errors import SetupError

ROOM_FILE = "room.json"


@dataclass(frozen=True)
class RoomRecord:
    """A room as `room up` recorded it. The board started by hand, or on Kubernetes, may have none."""

    room_id: str = ""
    url: str = ""
    teacher_token: str = ""
    teacher: str = "teacher"
    teacher_password: str = ""
    participant_password: str = ""
    participants: tuple[str, ...] = ()
    image: str = ""
    grader_image: str = ""
    network: str = ""
    port: int = 0
    teacher_lab: bool = False
    hub_pid: int = 0
    # Where the labs reach the hub, and its proxy's and board's ports: kept from one `room up` to the next,
    # since a lab keeps the hub address it was created with (its JUPYTERHUB_API_URL).
    hub_ip: str = ""
    hub_port: int = 0
    proxy_api_port: int = 0
    board_port: int = 0
    swarm: bool = False  # the labs are Swarm services on the workers (`room up --swarm`)
    node_engines: tuple[str, ...] = ()  # the swarm's nodes' own engines (`--node-engine`): `room down` uses them

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RoomRecord:
        """Known keys only (a newer labkit's extra keys are ignored); the logins as a tuple."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["participants"] = tuple(str(p) for p in data.get("participants") or ())
        values["node_engines"] = tuple(str(u) for u in data.get("node_engines") or ())
        return cls(**values)

    def write(self, directory: Path) -> Path:
        path = Path(directory) / ROOM_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(
                json.dumps(
                    {**asdict(self), "participants": list(self.participants), "node_engines": list(self.node_engines)},
                    indent=2,
                )
                + "\n"
            )
        return path


def read_if_any(directory: Path) -> RoomRecord | None:
    """The record in ``directory``, None when there is none; SetupError when it cannot be read."""
    path = Path(directory) / ROOM_FILE
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return RoomRecord.from_json(data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise SetupError(
            detail=str(exc),
            remedy=f"`labkit room up --dir {directory}` writes it again",
            missing=str(path),
            reason="unreadable",
        ) from None


def read(directory: Path) -> RoomRecord:
    """The record of a room that `room up` started, or SetupError saying how to start one."""
    try:
        record = read_if_any(directory)
    except SetupError:
        record = None
    if record is None or not record.url or not record.room_id:
        path = Path(directory) / ROOM_FILE
        raise SetupError(
            missing=str(path),
            reason="missing or unreadable",
            remedy=f"start the room with `labkit room up --dir {directory}`",
        )
    return record
