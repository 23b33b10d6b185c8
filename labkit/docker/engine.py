"""The Docker engine: connecting (with a clear SetupError when none answers), what it offers, and
what it refused before (remembered per engine, across processes)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import docker.client
import docker.errors

import docker

from ..errors import SetupError
from ..plumbing import triton_dist
from .engine_errors import ENGINE_ERRORS

HOW_TO_START = (
    "Start one: `sudo dockerd` (on this project's CI machines `sudo .ci/docker-engine.sh` installs docker.io "
    "and starts dockerd on overlay2 where the kernel can mount it, else vfs), or start Docker Desktop; set DOCKER_HOST if it listens "
    "elsewhere. Without Docker, use the embedded server (labkit.start())."
)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything behind it: causes, contexts, and exceptions carried as arguments
    (urllib3 wraps the OSError that says what really happened)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]  # a cause or context may be None
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__, *(a for a in item.args if isinstance(a, BaseException))]


def _why(exc: BaseException) -> type[OSError] | None:
    for cause in _causes(exc):
        for kind in (PermissionError, FileNotFoundError, ConnectionRefusedError):
            if type(cause) is kind:
                return kind
    return None


def connect(timeout: int | None = 60, url: str = "") -> docker.client.DockerClient:
    """A docker-py client for the engine in the environment (DOCKER_HOST or the default socket), or for the
    one at ``url`` (as DOCKER_HOST takes it: ``unix://``, ``tcp://``, ``ssh://user@host``, the last through
    the machine's own ``ssh``, as the docker command does; TLS from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH).

    Raises SetupError, saying how to start an engine, when none answers.
    """
    where = url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.client.from_env(
            timeout=timeout,
            environment={**os.environ, "DOCKER_HOST": where},
            use_ssh_client=where.startswith("ssh://"),
        )
        client.ping()
        return client
    except ENGINE_ERRORS as exc:
        why = _why(exc)
        if why is PermissionError:
            raise SetupError(
                missing="Docker engine",
                reason="permission denied",
                detail=f"the engine at {where} refused this user",
                remedy="Add yourself to the `docker` group (`sudo usermod -aG docker $USER`, then log in again) "
                "or run as root",
            ) from None
        reasons: dict[type[OSError] | None, str] = {
            FileNotFoundError: "no socket there",
            ConnectionRefusedError: "connection refused",
        }
        reason = reasons.get(why, str(exc))
        raise SetupError(
            missing="Docker engine",
            reason="unreachable",
            detail=f"nothing answers at {where}: {reason}",
            remedy=HOW_TO_START,
        ) from None


def engine_status() -> tuple[bool, str]:
    """(True, engine version) when an engine answers, else (False, why not and how to start one)."""
    try:
        client = connect(timeout=10)
    except SetupError as exc:
        return False, str(exc)
    try:
        return True, client.version().get("Version", "?")
    finally:
        client.close()


def gpu_runtime(client: docker.client.DockerClient) -> str | None:
    """The engine's GPU-capable runtime (e.g. ``nvidia``), or None when it lists none."""
    runtimes = client.info().get("Runtimes") or {}
    return next((name for name in runtimes if "nvidia" in name.lower()), None)


def engine_note(engine_id: str, key: str, value: bool | None = None) -> bool:
    """Read (``value`` None) or remember what an engine refused, so a launch need not try twice."""
    path = triton_dist.cache_dir() / "docker-engines.json"
    try:
        notes = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        notes = {}
    if value is None:
        return bool(engine_id and notes.get(engine_id, {}).get(key))
    if engine_id:
        notes.setdefault(engine_id, {})[key] = value
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(notes, indent=1))
    return value
