"""labkit's containers: the labels every one carries, and removing those whose owner died.

A killed kernel cannot remove its container; the labels say who started it (host, pid and that
process's start time, so a reused pid is not mistaken for it), and every launch (and
``labkit cleanup``) removes the containers of owners that are gone.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import docker.client
import docker.errors

import docker

from ..plumbing.owner import UNKNOWN, Owner
from .engine import connect
from .engine_errors import engine_error

LABEL_MANAGED = "labkit.managed"
LABEL_OWNER = "labkit.owner"  # <hostname>:<pid> of the Python process that started the container
LABEL_OWNER_START = "labkit.owner_start"  # that process's start time
LABEL_WORKDIR = "labkit.workdir"  # a temporary folder the owner would have removed on stop
LABEL_KIND = "labkit.kind"
_CONFLICT = 409  # the engine is already removing it


def owner_labels(owner: Owner | None = None) -> dict[str, str]:
    owner = owner or Owner.me()
    return {LABEL_OWNER: f"{owner.host}:{owner.pid}", LABEL_OWNER_START: owner.start}


def owner_dead(labels: dict[str, str]) -> bool:
    """True when the process that started a labkit container is gone (on this host; other hosts are not judged)."""
    host, _, pid_text = (labels.get(LABEL_OWNER) or "").rpartition(":")
    if not pid_text.isdigit():
        return False
    return Owner(host, int(pid_text), labels.get(LABEL_OWNER_START, UNKNOWN)).dead()


def leftovers(all: bool = False, client: docker.client.DockerClient | None = None) -> list[Any]:
    """labkit's containers whose owner process is dead (with ``all``: every labkit container)."""
    client = client or connect()
    found = client.containers.list(all=True, ignore_removed=True, filters={"label": f"{LABEL_MANAGED}=1"})
    return [c for c in found if all or owner_dead(c.labels)]


def cleanup(all: bool = False, *, client: docker.client.DockerClient | None = None) -> list[str]:
    """Remove labkit's leftover containers; returns their names.

    By default only containers whose owner process (a kernel, a script) is dead on this host; with
    ``all=True`` every container labkit started, including those of running servers. The temporary
    work folder of a dead owner is removed too. Runs automatically at every Docker launch.
    """
    own_client = client is None
    client = client or connect()
    try:
        return _remove(leftovers(all, client))
    finally:
        if own_client:
            client.close()


def _remove(containers: list[Any]) -> list[str]:
    removed = []
    for container in containers:
        dead = owner_dead(container.labels)
        try:
            container.remove(force=True, v=True)
            removed.append(container.name)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if exc.status_code != _CONFLICT:
                raise engine_error(
                    exc, f"remove container {container.name}", f"Remove it with `docker rm -f {container.name}`"
                ) from None
        workdir = container.labels.get(LABEL_WORKDIR)
        if dead and workdir and Path(workdir).name.startswith("labkit-docker-"):
            shutil.rmtree(workdir, ignore_errors=True)
    return removed
