"""The room's ``jupyterhub_config.py``, rendered from RoomSettings (a pure function: same settings, same text).

    text = render_config(settings, Plumbing(hub_ip="172.18.0.1", hub_port=41001, ...))

Secrets never enter the file: it reads them from the hub's environment (``SECRET_ENV``), which
``labkit room up`` sets when it starts the hub. A site's own ``--config FILE`` is loaded last, so its
settings (an OAuthenticator, say) win over the room's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..protocol import ROOM_LABEL, WORK_LABEL
from ..settings import BOARD_SCOPES, RoomSettings, size_bytes
from .processes import command_for

#: Environment variables the rendered configuration reads its secrets from.
SECRET_ENV = {
    "user_password": "LABKIT_ROOM_USER_PASSWORD",  # participants' shared password
    "admin_password": "LABKIT_ROOM_ADMIN_PASSWORD",  # the teacher's password
    "teacher_token": "LABKIT_ROOM_TEACHER_TOKEN",  # the teacher's API token (room.json)
    "proxy_token": "CONFIGPROXY_AUTH_TOKEN",  # between the hub and configurable-http-proxy
}
HOME = "/home/jovyan"
WORK = f"{HOME}/work"  # each participant's volume; the notebooks are copied here at first start
START_COMMAND = "/usr/local/bin/labkit-lab-start"  # in the participant image (labkit/room/hub/lab_image.py)
SWARM_SPAWNER = "labkit.room.hub.swarmspawner.RoomSwarmSpawner"
LAB_POLL_S = 10
# on a swarm, the board reads each lab's node from its spawner's state, and starts again the labs of a node
# that returns (labkit.room.board.nodes)
SWARM_BOARD_SCOPES = ("admin:server_state", "servers")


@dataclass(frozen=True)
class Plumbing:
    """What `room up` finds on this machine before rendering: addresses, free ports, programs."""

    hub_ip: str  # the room network's gateway: the hub listens there and the labs call it there
    hub_port: int
    proxy_api_port: int
    board_port: int
    proxy_command: tuple[str, ...]  # configurable-http-proxy
    python: str  # the Python of labkit's environment (runs the board and the idle culler)
    # with --swarm: (login, swarm node id) of each participant's first start, spread over the workers
    placement: tuple[tuple[str, str], ...] = ()


class _Env:
    """A value read from the hub's environment when the configuration loads (its repr is that code)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"os.environ[{self.name!r}]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Env) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class _Expr:
    """Python code evaluated when the configuration loads (its repr is that code)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __repr__(self) -> str:
        return self.code

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Expr) and other.code == self.code

    def __hash__(self) -> int:
        return hash(self.code)


# JupyterHub gives a service only a few variables of its own environment; the board reaches Docker, and runs
# the labkit that started the room (PYTHONPATH: a checkout's, not another one installed in the environment).
_PASSED = (
    "DOCKER_HOST",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "HOME",
    "XDG_CACHE_HOME",
    "LABKIT_CPU_IMAGE",
    "PYTHONPATH",
)
BOARD_ENV = _Expr(f"{{name: os.environ[name] for name in {_PASSED!r} if name in os.environ}}")


def _secret(key: str) -> _Env:
    return _Env(SECRET_ENV[key])


def cull_every(settings: RoomSettings) -> int:
    """Seconds between the idle culler's rounds: a lab idle past the limit goes within a third of it."""
    return max(10, min(60, settings.cull_idle_s // 3))


def teacher_code(settings: RoomSettings) -> str:
    """Python for the hub's configuration (`room up`'s and the Kubernetes values' extraConfig): where a user
    lands (the teacher: on the board; a participant: in their lab, JupyterHub's default) and, unless
    ``settings.teacher_lab``, a ``pre_spawn_hook`` that refuses the teacher a lab of their own."""
    if settings.board:
        landing = "handler.base_url + 'services/board/'"
    elif settings.teacher_lab:
        landing = "''"  # no board: the teacher's own lab, as for anyone
    else:
        landing = "handler.base_url + 'hub/admin'"
    code = [
        "def labkit_landing(handler):",
        '    """c.JupyterHub.default_url: the teacher lands on the board, everyone else on their lab ("")."""',
        "    user = handler.current_user",
        f"    return {landing} if user is not None and user.name == {settings.teacher!r} else ''",
    ]
    if not settings.teacher_lab:
        code += [
            "",
            "",
            "def labkit_no_teacher_lab(spawner):",
            '    """c.Spawner.pre_spawn_hook: the teacher has no lab of their own (`labkit room up --teacher-lab` gives one)."""',
            f"    if spawner.user.name == {settings.teacher!r}:",
            "        from tornado import web",
            "",
            "        raise web.HTTPError(403, 'The teacher has no lab in this room: the board is at /services/board/. '",
            "                            'Start the room with `labkit room up --teacher-lab` for a lab of your own.')",
        ]
    return "\n".join(code) + "\n"


def swarm_config(settings: RoomSettings, plumbing: Plumbing, config: dict[str, dict[str, Any]]) -> None:
    """With --swarm: the labs as services on the workers (labkit.room.hub.swarmspawner), their work volumes
    made by Swarm on their node, the board reading saved notebooks through the hub's proxy (the volumes
    are on other machines) and judging them in grader services on the workers
    (labkit.room.grader.swarm_runner)."""
    config["JupyterHub"]["spawner_class"] = SWARM_SPAWNER
    spawner = config.pop("DockerSpawner")
    for name in ("network_name", "use_internal_ip", "remove", "extra_host_config"):
        spawner.pop(name)  # no room network (no overlay: no IPVS), a service is always removed, no host config
    spawner["pull_policy"] = "skip"  # images reach the workers from the manager; a worker's engine is not asked
    config["RoomSwarmSpawner"] = {
        **spawner,
        "placement": dict(plumbing.placement),
        "work_labels": {WORK_LABEL: settings.room_id, f"{ROOM_LABEL}.user": "{raw_username}"},
        "shm_bytes": size_bytes(settings.shm_size, "shm_size", spawner=True),
    }
    for service in config["JupyterHub"]["services"]:
        if service["name"] == "board":
            host = settings.ip if settings.ip not in ("", "0.0.0.0") else "127.0.0.1"
            labs = ["--notebooks", "jupyter", "--labs-url", f"http://{host}:{settings.port}"]
            service["command"] = [*service["command"], "--swarm", *labs, "--grader", "swarm"]
    for role in config["JupyterHub"]["load_roles"]:
        if role["name"] == "board":  # the board names who a node holds, and starts their labs when it returns
            role["scopes"] = [*role["scopes"], *SWARM_BOARD_SCOPES]


def hub_config(settings: RoomSettings, plumbing: Plumbing) -> dict[str, dict[str, object]]:
    """The room's JupyterHub configuration as {configurable class: {trait: value}}."""
    config = _one_machine(settings, plumbing)
    if settings.swarm:
        swarm_config(settings, plumbing, config)
    return config


def _one_machine(settings: RoomSettings, plumbing: Plumbing) -> dict[str, dict[str, Any]]:
    """The configuration of a room on one engine (labs as containers on the room's network)."""
    directory = settings.directory.absolute()
    room = settings.room_id
    every = cull_every(settings)
    culler = [
        plumbing.python,
        "-m",
        "jupyterhub_idle_culler",
        f"--timeout={settings.cull_idle_s}",
        f"--cull-every={every}",
    ]
    board, board_roles = [], []
    if settings.board:  # the hub stops when a managed service exits: only a board that exists is named
        board = [
            {
                "name": "board",
                "url": f"http://127.0.0.1:{plumbing.board_port}",
                "command": command_for(
                    directory,
                    "board",
                    [plumbing.python, "-m", "labkit.room.board.service", "--room-dir", str(directory)],
                    plumbing.python,
                ),
                "oauth_no_confirm": True,
                "environment": BOARD_ENV,
            }
        ]
        board_roles = [
            {
                "name": "teacher",
                "description": "opens the teacher's board",
                "users": [settings.teacher],
                "scopes": ["access:services!service=board"],
            },
            {
                "name": "board",
                "description": "the board lists participants' labs and reads their saved notebooks",
                "services": ["board"],
                "scopes": list(BOARD_SCOPES),
            },
        ]
    return {
        "JupyterHub": {
            "bind_url": f"http://{settings.ip}:{settings.port}",
            "hub_ip": plumbing.hub_ip,
            "hub_port": plumbing.hub_port,
            "db_url": f"sqlite:///{directory / 'jupyterhub.sqlite'}",
            "cookie_secret_file": str(directory / "jupyterhub_cookie_secret"),
            # Labs outlive a hub restart; `room down` removes them itself (faster than the hub stopping each).
            "cleanup_servers": False,
            "authenticator_class": "shared-password",
            "default_url": _Expr("labkit_landing"),  # defined by teacher_code(), above it in the file
            "spawner_class": "docker",
            # The teacher's token, written into room.json for scripts and the tests (pending deprecation
            # in JupyterHub, still the one way to give a user a token known before the hub starts).
            "api_tokens": {_secret("teacher_token"): settings.teacher},
            "services": [
                *board,
                {"name": "idle-culler", "command": command_for(directory, "idle-culler", culler, plumbing.python)},
            ],
            "load_roles": [
                *board_roles,
                {
                    "name": "idle-culler",
                    "description": "stops labs idle longer than --cull-idle-s",
                    "services": ["idle-culler"],
                    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
                },
            ],
        },
        "ConfigurableHTTPProxy": {
            # the proxy, the board and the culler record themselves as they start (labkit.room.hub.processes): a
            # hub that dies leaves them running, and `room up` / `room down` end them by those records
            "command": command_for(directory, "proxy", plumbing.proxy_command, plumbing.python),
            "api_url": f"http://127.0.0.1:{plumbing.proxy_api_port}",
            "auth_token": _secret("proxy_token"),
        },
        "Authenticator": {
            "allowed_users": set(settings.participants),
            "admin_users": {settings.teacher},
        },
        "SharedPasswordAuthenticator": {
            "user_password": _secret("user_password"),
            "admin_password": _secret("admin_password"),
        },
        "Spawner": {
            # the hub asks each lab's container whether it still runs this often (JupyterHub's default: 30 s):
            # a lab killed (out of memory, say) is seen stopped sooner, and its participant offered a restart
            "poll_interval": LAB_POLL_S,
            "start_timeout": settings.start_timeout_s,
            "http_timeout": settings.start_timeout_s,
            "default_url": "/lab",
            **({} if settings.teacher_lab else {"pre_spawn_hook": _Expr("labkit_no_teacher_lab")}),
        },
        "DockerSpawner": {
            "image": settings.image,
            "pull_policy": "never",  # the image is built here; no registry is asked
            "cmd": [START_COMMAND],
            "prefix": settings.prefix,
            "name_template": "{prefix}-{raw_username}",  # logins are checked safe names (no escaping needed)
            "network_name": settings.network,
            "use_internal_ip": True,
            # A stopped lab's container stays, and starts again in seconds (a new one copies the whole image
            # on vfs engines, and one being auto-removed blocks its name); `room down` removes them all.
            "remove": False,
            "volumes": {settings.volume("{raw_username}"): WORK},
            "notebook_dir": WORK,
            "cpu_limit": settings.cpu,
            "mem_limit": settings.memory,
            "extra_create_kwargs": {"labels": {ROOM_LABEL: room, f"{ROOM_LABEL}.user": "{raw_username}"}},
            "extra_host_config": {
                "shm_size": settings.shm_size.lower(),
                "security_opt": ["no-new-privileges"],
            },
        },
    }


def _literal(value: object) -> str:
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(repr(v) for v in sorted(value)) + "}" if value else "set()"
    return repr(value)


def render_config(settings: RoomSettings, plumbing: Plumbing) -> str:
    """The text of ``jupyterhub_config.py`` for the room (see the module's docstring)."""
    lines = [
        "# Written by `labkit room up`; rewritten at each `room up`. Put a site's own settings in a file",
        "# of your own and pass it with `labkit room up --config FILE`.",
        "import os",
        "",
        "c = get_config()  # noqa: F821",
        "",
        "",
        *teacher_code(settings).splitlines(),
    ]
    for section, traits in hub_config(settings, plumbing).items():
        lines.append("")
        lines += [f"c.{section}.{name} = {_literal(value)}" for name, value in traits.items()]
    if settings.config_file is not None:
        lines += [
            "",
            "# the site's own settings",
            f"load_subconfig({str(settings.config_file.absolute())!r})  # noqa: F821",
        ]
    return "\n".join(lines) + "\n"
