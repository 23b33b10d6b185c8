"""What a room is made of: one frozen record that `room up`, the hub's configuration, the board and the
Kubernetes values are all rendered from."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import RoomSettingsError

PARTICIPANT_IMAGE = "labkit/lab:23.12-cpu"
GRADER_IMAGE = "labkit/grader:23.12-cpu"
# What the board's token may do on the hub: list users and their labs, and read the labs' saved notebooks.
BOARD_SCOPES = ("list:users", "read:users:name", "read:servers", "access:servers")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([bkmgt]?)$", re.IGNORECASE)  # Docker's: '2g', '512m', bytes
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(size: object, setting: str, *, spawner: bool = False) -> tuple[str, str]:
    """(number, unit in lower case) of a size, the room's one parser of sizes: powers of 1024, as Docker
    reads them (``2g``, ``512m``, bytes), or with ``spawner`` as JupyterHub's spawners read a lab's memory
    (a number and one of K, M, G, T: ``2G``; 'Gi' and 'GB' refused). RoomSettingsError naming ``setting``."""
    match = _SIZE.match(size.strip()) if isinstance(size, str) and not spawner else None
    if spawner and isinstance(size, str) and size[-1:] in ("K", "M", "G", "T"):
        try:  # exactly as ByteSpecification reads it: float() of what precedes the unit
            number = float(size[:-1])
        except ValueError:
            number = 0.0
        if number > 0:
            return size[:-1].strip(), size[-1].lower()
    if match is None or float(match.group(1)) <= 0 or (match.group(2).lower() in ("", "b") and "." in match.group(1)):
        spelling = (
            ("a number and one of K, M, G, T (powers of 1024, so '2G' is Kubernetes' 2Gi; 'Gi' and 'GB' are refused)")
            if spawner
            else ("a number and one of k, m, g, t (powers of 1024, as Docker reads it: '2g' is Kubernetes' 2Gi)")
        )
        raise RoomSettingsError(setting=setting, value=str(size), problem="is not a size", remedy=f"write {spelling}")
    return match.group(1), match.group(2).lower()


def size_bytes(size: object, setting: str, *, spawner: bool = False) -> int:
    number, unit = parse_size(size, setting, spawner=spawner)
    return int(float(number) * _UNITS[unit])


def volume_name(room_id: str, login: str) -> str:
    """The Docker volume of ``login``'s work in room ``room_id`` (the board knows only the room's id)."""
    return f"labkit-room-{room_id}-{login}"


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
    board: bool = True  # serve the teacher's board (labkit.room.board.service) as a hub service
    teacher_lab: bool = False  # the teacher may start a lab of their own (else they land on the board, and only there)
    swarm: bool = False  # labs as Swarm services on the workers of the swarm whose manager is this engine
    # with swarm: the nodes' own engines (DOCKER_HOST's URL forms), to copy images and remove work there
    node_engines: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Refuse what the hub, DockerSpawner or KubeSpawner would refuse later (at a spawn, or at `helm install`):
        `room up`, `room k8s` and `room bench` are checked alike."""
        parse_size(self.memory, "memory", spawner=True)
        parse_size(self.shm_size, "shm_size", spawner=True)
        if isinstance(self.cpu, bool) or not isinstance(self.cpu, (int, float)) or not self.cpu > 0:
            raise RoomSettingsError(
                problem="is not a number of cores",
                remedy="give a positive number (0.5, 2)",
                setting="cpu",
                value=str(self.cpu),
            )
        if isinstance(self.cull_idle_s, bool) or not isinstance(self.cull_idle_s, int) or self.cull_idle_s < 0:
            raise RoomSettingsError(
                problem="is not whole seconds",
                remedy="give whole seconds (0 turns the culler off)",
                setting="cull_idle_s",
                value=str(self.cull_idle_s),
            )
        if not self.participants or self.teacher in self.participants:
            raise RoomSettingsError(
                problem=f"has none, or the teacher's login ({self.teacher})",
                remedy="the room needs at least one participant, and the teacher's login must not be one of theirs",
                setting="participants",
                value=",".join(self.participants),
            )
        if self.node_engines and not self.swarm:
            raise RoomSettingsError(
                setting="node_engines",
                value=",".join(self.node_engines),
                problem="names the engines of a swarm's nodes, and this room runs on one engine",
                remedy="add --swarm (run on the swarm's manager), or leave --node-engine out",
            )
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise RoomSettingsError(
                setting="port", value=str(self.port), problem="is not a TCP port", remedy="give one from 1 to 65535"
            )

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
        return volume_name(self.room_id, login)

    @staticmethod
    def numbered(count: int) -> tuple[str, ...]:
        """Logins p01 … pNN (at least two digits)."""
        width = max(2, len(str(count)))
        return tuple(f"p{i:0{width}d}" for i in range(1, count + 1))

    def with_(self, **changes: object) -> RoomSettings:
        return replace(self, **changes)  # type: ignore[arg-type]
