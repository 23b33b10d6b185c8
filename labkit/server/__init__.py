"""Launchers for Triton 23.12 behind one interface (TritonServer)."""

from pathlib import Path
from typing import Any

from .base import TritonServer, current
from .embedded import EmbeddedServer
from .logs import LogView

__all__ = ["DockerServer", "EmbeddedServer", "LogView", "TritonServer", "create", "current"]

KINDS = ("embedded", "docker")


def create(kind: str = "embedded", repository: str | Path | None = None, **options: Any) -> TritonServer:
    """A server of either kind, not yet started. ``kind="docker"`` takes DockerServer's options
    (``image=``, ``gpus=``, ...); the embedded server takes EmbeddedServer's."""
    if kind == "embedded":
        return EmbeddedServer(repository, **options)
    if kind == "docker":
        from .docker import DockerServer

        return DockerServer(repository, **options)
    raise ValueError(f"server must be one of {', '.join(KINDS)}, not {kind!r}")


def __getattr__(name: str) -> object:
    # docker-py costs ~0.15 s to import: only pay it when the Docker launcher is used.
    if name == "DockerServer":
        from .docker import DockerServer

        return DockerServer
    raise AttributeError(name)
