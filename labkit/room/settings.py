"""What a room is made of: one frozen record that `room up`, the hub's configuration, the board and the
Kubernetes values are all rendered from."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

PARTICIPANT_IMAGE = "labkit/lab:23.12-cpu"
GRADER_IMAGE = "labkit/grader:23.12-cpu"
ROOM_LABEL = "labkit.room"  # every container, network and volume of a room carries it (value: the room's id)


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

    @staticmethod
    def numbered(count: int) -> tuple[str, ...]:
        """Logins p01 … pNN (at least two digits)."""
        width = max(2, len(str(count)))
        return tuple(f"p{i:0{width}d}" for i in range(1, count + 1))

    def with_(self, **changes: object) -> "RoomSettings":
        return replace(self, **changes)  # type: ignore[arg-type]
