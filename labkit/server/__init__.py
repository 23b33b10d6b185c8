"""Launchers for Triton 23.12 behind one interface (TritonServer).

``base`` holds what every server shares, ``model_control`` the model calls, ``options`` Triton's
command line; ``launchers/`` has one module per way of running Triton (embedded, docker).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

from . import launchers
from .base import TritonServer, current
from .launchers.embedded import EmbeddedServer
from .logs import LogView

__all__ = ["EmbeddedServer", "LogView", "TritonServer", "create", "current", "kinds", "launcher"]


def kinds() -> list[str]:
    """The launchers there are (module names in labkit/server/launchers/), without importing them."""
    return sorted(m.name for m in pkgutil.iter_modules(launchers.__path__) if not m.name.startswith("_"))


def launcher(kind: str) -> type[TritonServer]:
    """The TritonServer subclass for ``kind``; its module is imported only now (docker-py costs ~0.15 s)."""
    if kind not in kinds():
        raise ValueError(f"server must be one of {', '.join(kinds())}, not {kind!r}")
    module = importlib.import_module(f"{launchers.__name__}.{kind}")
    found = [v for v in vars(module).values()
             if isinstance(v, type) and issubclass(v, TritonServer) and v.kind == kind]
    if len(found) != 1:
        raise ValueError(f"labkit.server.launchers.{kind} must define one TritonServer subclass with kind={kind!r}")
    return found[0]


def create(kind: str = "embedded", repository: str | Path | None = None, **options: Any) -> TritonServer:
    """A server of the given kind, not yet started. Each kind takes TritonServer's options and its own
    (``kind="docker"``: ``image=``, ``gpus=``, ...)."""
    return launcher(kind)(repository, **options)
