"""Triton 23.12 behind one interface (TritonServer), composed of small parts:

``config`` (ServerConfig, Triton's command line), ``runtime`` (the Runtime protocol and the folders it
shares), ``health`` (crashes), ``control`` (the HTTP control plane), ``models`` (every model call) and
``base`` (the TritonServer facade); ``launchers/`` has one module per way of running Triton (embedded,
docker), each a Runtime and the TritonServer subclass that builds it.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any, Protocol, cast

from ..errors import OptionError
from . import launchers
from .base import TritonServer, current
from .launchers.embedded import EmbeddedServer
from .logs import LogView
from .server_config import ServerConfig

__all__ = ["EmbeddedServer", "LogView", "ServerConfig", "TritonServer", "create", "current", "kinds", "launcher"]


class _LauncherClass(Protocol):
    """How a launcher's TritonServer subclass is built (not the base's ``(runtime, config)``)."""

    def __call__(
        self, repository: str | Path | None = None, workdir: str | Path | None = None, **options: Any
    ) -> TritonServer: ...


def kinds() -> list[str]:
    """The launchers there are (module names in labkit/server/launchers/), without importing them."""
    return sorted(m.name for m in pkgutil.iter_modules(launchers.__path__) if not m.name.startswith("_"))


def launcher(kind: str) -> type[TritonServer]:
    """The TritonServer subclass for ``kind``; its module is imported only now (docker-py costs ~0.15 s)."""
    if kind not in kinds():
        raise OptionError(option="server", value=kind, valid=f"one of {', '.join(kinds())}")
    module = importlib.import_module(f"{launchers.__name__}.{kind}")
    found = [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, TritonServer) and v.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise ValueError(f"labkit.server.launchers.{kind} must define one TritonServer subclass")
    return found[0]


def create(kind: str = "embedded", repository: str | Path | None = None, **options: Any) -> TritonServer:
    """A server of the given kind, not yet started. Each kind takes ServerConfig's options and its
    runtime's own (``kind="docker"``: ``image=``, ``gpus=``, ...)."""
    # Each launchers/ subclass (EmbeddedServer, DockerServer) defines __init__(repository, workdir, **options).
    server_class = cast(_LauncherClass, launcher(kind))
    return server_class(repository, **options)
