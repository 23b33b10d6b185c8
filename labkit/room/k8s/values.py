"""The room on Kubernetes: a values file for the Zero to JupyterHub chart (KubeSpawner), rendered from the
same RoomSettings as `labkit room up`, for rooms larger than one machine.

    labkit room k8s --out k8s --participants 60 --memory 3G
    helm upgrade --install room jupyterhub/jupyterhub --version 4.4.0 --values k8s/values.yaml

The chart itself is not changed: everything below is one of its documented values (its schema is checked
in the tests); the board is a second container of the hub's pod (labkit.room.k8s.board_container). What differs
from `room up` (one Docker host) is said in docs/workshop.md.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...errors import RoomSettingsError
from ..grader.sandbox import memory_quantity
from ..hub.hubconfig import START_COMMAND, WORK, cull_every, teacher_code
from ..settings import RoomSettings
from . import board_container as k8s_board
from .pods import network_policy

CHART_VERSION = "4.4.0"
CHART_JUPYTERHUB = "5.5"  # the JupyterHub in that chart's hub image; a lab image's must share its major version
CPU_OVERCOMMIT = 2  # CPU is compressible: guarantee half the limit; memory is not: guarantee the limit
POLICY_FILE = "grader-network-policy.yaml"  # beside values.yaml: what the chart's RBAC cannot create


@dataclass(frozen=True)
class Credentials:
    """The room's shared password (participants) and the teacher's own (JupyterHub wants 32+ characters
    for an admin): kept out of RoomSettings, so rendering stays a pure function of what it is given."""

    user_password: str
    teacher_password: str

    @classmethod
    def generate(cls) -> Credentials:
        return cls(user_password=secrets.token_urlsafe(9), teacher_password=secrets.token_urlsafe(32))


def chart_image(image: str) -> tuple[str, str]:
    """(name, tag) of the lab image for the chart's JupyterHub: `labkit/lab:23.12-cpu` becomes
    `labkit/lab` + `23.12-cpu-hub5.5`, the tag `labkit room image --jupyterhub 5.5` builds."""
    if "@" in image:
        raise RoomSettingsError(
            problem="is pinned by digest; the chart needs a name and a tag",
            remedy="Give --image NAME:TAG",
            setting="image",
            value=image,
        )
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag, or the colon was a registry's port
        name, tag = image, "latest"
    suffix = f"-hub{CHART_JUPYTERHUB}"
    return name, tag if tag.endswith(suffix) else f"{tag}{suffix}"


def grader_image(settings: RoomSettings) -> str:
    """The grader image the board runs from and starts Pods of: built on the chart's lab image
    (`labkit room image --jupyterhub 5.5 --grader`), so it carries the hub's JupyterHub too."""
    return ":".join(chart_image(settings.grader_image))


def check(settings: RoomSettings) -> None:
    """Refuse settings the chart would refuse later: RoomSettings checks its own fields when it is made, the
    chart adds a rule of its own for the image."""
    chart_image(settings.image)


def values(settings: RoomSettings, credentials: Credentials | None, *, site_config: str = "") -> dict[str, Any]:
    """The chart's values for this room. ``credentials`` None: the site's own authenticator, configured by
    ``site_config`` (the text of settings.config_file, e.g. an OAuthenticator's settings)."""
    check(settings)
    name, tag = chart_image(settings.image)
    hub: dict[str, Any] = {"config": _auth(settings, credentials)}
    if settings.board:
        hub.update(k8s_board.hub_values(settings, grader_image(settings)))
    # the teacher lands on the board and (unless teacher_lab) has no lab, as in `room up`'s hub
    teacher = teacher_code(settings) + (
        "\nc.JupyterHub.default_url = labkit_landing\n"
        + ("" if settings.teacher_lab else "c.KubeSpawner.pre_spawn_hook = labkit_no_teacher_lab\n")
    )
    hub["extraConfig"] = {"10-labkit-teacher.py": teacher}
    if site_config:
        hub["extraConfig"]["90-site.py"] = site_config
    return {
        "hub": hub,
        "singleuser": {
            "image": {"name": name, "tag": tag, "pullPolicy": "IfNotPresent"},
            "cpu": {"limit": float(settings.cpu), "guarantee": float(settings.cpu) / CPU_OVERCOMMIT},
            "memory": {"limit": settings.memory, "guarantee": settings.memory},
            "cmd": START_COMMAND,  # the image's: the notebooks into the work folder at first start, then the lab
            "defaultUrl": "/lab",
            "uid": 1000,  # the image's jovyan
            "storage": {  # each participant's claim at the image's work folder, as the volume of `room up`
                "type": "dynamic",
                "homeMountPath": WORK,
                "extraVolumes": [
                    {
                        "name": "shm",
                        "emptyDir": {"medium": "Memory", "sizeLimit": memory_quantity(settings.shm_size, "shm_size")},
                    }
                ],
                "extraVolumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
            },
            "startTimeout": settings.start_timeout_s,
        },
        "cull": {
            "enabled": settings.cull_idle_s > 0,
            "users": False,
            "timeout": settings.cull_idle_s or None,
            "every": cull_every(settings) if settings.cull_idle_s else None,
        },
        "prePuller": {"hook": {"enabled": True}, "continuous": {"enabled": True}},
    }


def _auth(settings: RoomSettings, credentials: Credentials | None) -> dict[str, Any]:
    """Shared password (JupyterHub's own SharedPasswordAuthenticator, 5.0+): participants share one
    password; the teacher is the admin and logs in with a password of their own."""
    roles = {"Authenticator": {"admin_users": [settings.teacher]}}
    if credentials is None:
        return roles
    return {
        "JupyterHub": {"authenticator_class": "shared-password"},
        "Authenticator": {
            "allowed_users": [*settings.participants, settings.teacher],
            "admin_users": [settings.teacher],
        },
        "SharedPasswordAuthenticator": {
            "user_password": credentials.user_password,
            "admin_password": credentials.teacher_password,
        },
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a site's config) as YAML block scalars, so the file stays readable."""


_Dumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def dump(rendered: dict[str, Any]) -> str:
    header = (
        f"# Zero to JupyterHub {CHART_VERSION} values for a labkit room (labkit room k8s). It holds the "
        "room's passwords: keep it private.\n"
    )
    return header + yaml.dump(rendered, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def write(settings: RoomSettings, out: Path, credentials: Credentials | None = None) -> Path:
    """Render DIR/values.yaml (mode 600: it holds the passwords) and, with the board, DIR/POLICY_FILE.
    Without ``settings.config_file`` the room uses shared passwords (``credentials``, generated when None)."""
    site = ""
    if settings.config_file is not None:
        try:
            site = Path(settings.config_file).read_text()
        except OSError as exc:
            raise RoomSettingsError(
                problem=f"cannot be read ({exc.strerror})",
                remedy="Give a readable file (the site's hub configuration)",
                setting="config_file",
                value=str(settings.config_file),
            ) from None
    creds = None if site else (credentials or Credentials.generate())
    text = dump(values(settings, creds, site_config=site))
    target = Path(out) / "values.yaml"
    policy = Path(out) / POLICY_FILE
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(mode=0o600)
        target.chmod(0o600)
        target.write_text(text)
        if settings.board:
            policy.write_text(
                "# labkit room k8s: no network for the room's grader Pods; apply it once with kubectl\n"
                + yaml.safe_dump(network_policy(settings.room_id), sort_keys=False)
            )
    except OSError as exc:
        raise RoomSettingsError(
            problem=f"cannot be written: {exc.filename or target} ({exc.strerror})",
            remedy="Choose another --out folder",
            setting="out",
            value=str(out),
        ) from None
    return target
