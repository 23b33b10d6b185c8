"""What a room is made of: one frozen record that `room up`, the hub's configuration, the board and the
Kubernetes values are all rendered from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path

PARTICIPANT_IMAGE = "labkit/lab:23.12-cpu"
GRADER_IMAGE = "labkit/grader:23.12-cpu"
ROOM_LABEL = "labkit.room"  # every container, network and volume of a room carries it (value: the room's id)
# What the board's token may do on the hub: list users and their labs, and read the labs' saved notebooks.
BOARD_SCOPES = ("list:users", "read:users:name", "read:servers", "access:servers")


@dataclass(frozen=True)
class RoomSettings:
    """A room's settings, as `labkit room up` takes them."""

    participants: tuple[str, ...] = field(default_factory=lambda: tuple(f"p{i:02d}" for i in range(1, 7)))
    port: int = 8080
    directory: Path = Path("room")
    cpu: float = 1.0
    memory: str = "2G"
    cull_idle_s: int = 3600
    image: str = PARTICIPANT_IMAGE
    grader_image: str = GRADER_IMAGE
    teacher: str = "teacher"
    config_file: Path | None = None  # a site's own jupyterhub_config.py additions (OAuth, ...)
    ip: str = ""  # where the hub's public proxy listens ("" = every interface, for participants' browsers)
    shm_size: str = "512M"  # /dev/shm of each lab: the Python backend stub's shared memory lives there
    start_timeout_s: int = 600  # many labs starting at once on a slow engine (vfs copies each image)
    board: bool = True  # serve the teacher's board (labkit.room.board) as a hub service
    teacher_lab: bool = False  # the teacher may start a lab of their own (else they land on the board, and only there)

    @property
    def room_id(self) -> str:
        """A short id of the room, from its directory's absolute path: two rooms on one engine do not clash."""
        return hashlib.sha256(str(self.directory.absolute()).encode()).hexdigest()[:8]

    @property
    def network(self) -> str:
        """The Docker network of the room's labs (the hub reaches them there, and they reach the hub)."""
        return f"labkit-room-{self.room_id}"

    @property
    def prefix(self) -> str:
        """Lab containers are named ``<prefix>-<login>``."""
        return f"labkit-{self.room_id}"

    def volume(self, login: str) -> str:
        """The Docker volume of ``login``'s work (kept by `room down` unless --delete-work)."""
        return f"labkit-room-{self.room_id}-{login}"

    @staticmethod
    def numbered(count: int) -> tuple[str, ...]:
        """Logins p01 … pNN (at least two digits)."""
        width = max(2, len(str(count)))
        return tuple(f"p{i:0{width}d}" for i in range(1, count + 1))

    def with_(self, **changes: object) -> "RoomSettings":
        return replace(self, **changes)  # type: ignore[arg-type]
