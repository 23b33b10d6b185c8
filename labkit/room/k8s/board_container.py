"""The teacher's board on Kubernetes: the part of the chart's values that serves it.

The board runs as a second container of the hub's pod (``hub.extraContainers``), from the grader image
(it holds labkit's checks, and JupyterHub for the hub's OAuth). It is an external JupyterHub service:
the hub routes ``/services/board/`` to it, gives its token ``BOARD_SCOPES`` (read the labs' saved notebooks
through their Jupyter API) and keeps that token in the chart's own Secret. It judges each save in a grader
Pod (labkit.room.k8s.pods) under the hub's service account, whose Role (chart 4.4.0) may create and delete
pods: nothing is added to the chart's RBAC. The one thing that Role may not create, the NetworkPolicy
that takes every network from the grader Pods (labkit.room.k8s.pods.network_policy), is applied once by hand.
"""

from __future__ import annotations

import json
from typing import Any

from ..settings import BOARD_SCOPES, RoomSettings

BOARD_PORT = 9090
PREFIX = "/services/board/"
HUB_API = "http://localhost:8081/hub/api"  # the hub, seen from its own pod
LABS_URL = "http://proxy-public"  # the chart's public proxy Service: the labs behind their /user/ paths
STATE = "/tmp/labkit-board"  # progress.json: the pod's own; a new board pod judges the saved notebooks again
TOKEN_SECRET = {"name": "hub", "key": "hub.services.board.apiToken"}  # the chart's Secret, its generated token
ACCESS_BOARD = "access:services!service=board"


def service_environment(api_url: str, service_url: str) -> dict[str, str]:
    """What JupyterHub gives a service it starts itself (the board of `room up`), for one it does not
    start: the hub's API, where to listen, and its OAuth client (JupyterHub's defaults for a service with
    a URL)."""
    access = json.dumps([ACCESS_BOARD])
    return {
        "JUPYTERHUB_SERVICE_NAME": "board",
        "JUPYTERHUB_API_URL": api_url,
        "JUPYTERHUB_SERVICE_URL": service_url,
        "JUPYTERHUB_SERVICE_PREFIX": PREFIX,
        "JUPYTERHUB_BASE_URL": "/",
        "JUPYTERHUB_HOST": "",
        "JUPYTERHUB_CLIENT_ID": "service-board",
        "JUPYTERHUB_OAUTH_CALLBACK_URL": PREFIX + "oauth_callback",
        "JUPYTERHUB_OAUTH_SCOPES": access,
        "JUPYTERHUB_OAUTH_ACCESS_SCOPES": access,
    }


def board_command(settings: RoomSettings, grader_image: str) -> list[str]:
    """The board's command line in the hub's pod."""
    return [
        "python3",
        "-m",
        "labkit.room.board.service",
        "--room-dir",
        STATE,
        "--room-id",
        settings.room_id,
        "--participants",
        ",".join(settings.participants),
        "--notebooks",
        "jupyter",
        "--labs-url",
        LABS_URL,
        "--grader",
        "kubernetes",
        "--grader-image",
        grader_image,
    ]


def hub_values(settings: RoomSettings, grader_image: str) -> dict[str, Any]:
    """The chart's ``hub`` values that serve the board (merged into the room's)."""
    env: list[dict[str, Any]] = [
        {"name": k, "value": v} for k, v in service_environment(HUB_API, f"http://0.0.0.0:{BOARD_PORT}").items()
    ]
    env.append({"name": "JUPYTERHUB_API_TOKEN", "valueFrom": {"secretKeyRef": TOKEN_SECRET}})
    board = {
        "name": "board",
        "image": grader_image,
        "imagePullPolicy": "IfNotPresent",
        "command": board_command(settings, grader_image),
        "env": env,
        "ports": [{"name": "board", "containerPort": BOARD_PORT}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {
            "runAsUser": 1000,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return {
        "services": {"board": {"url": f"http://hub:{BOARD_PORT}", "oauth_no_confirm": True}},
        "loadRoles": {
            "teacher": {
                "description": "opens the teacher's board",
                "users": [settings.teacher],
                "scopes": [ACCESS_BOARD],
            },
            "board": {
                "description": "lists the participants' labs and reads their saved notebooks",
                "services": ["board"],
                "scopes": list(BOARD_SCOPES),
            },
        },
        "service": {"extraPorts": [{"name": "board", "port": BOARD_PORT, "targetPort": BOARD_PORT}]},
        # the proxy carries this label; the chart's own rule lets it reach the hub's port 8081 only
        "networkPolicy": {
            "ingress": [
                {
                    "ports": [{"port": BOARD_PORT}],
                    "from": [{"podSelector": {"matchLabels": {"hub.jupyter.org/network-access-hub": "true"}}}],
                }
            ]
        },
        "extraContainers": [board],
    }
