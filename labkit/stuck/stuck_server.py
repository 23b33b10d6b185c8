"""What the stuck wing reads of a server: a Protocol, so that this wing below the server names what it
uses without importing it (a ``TritonServer`` and its ``Models`` both have it)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..repository import ModelRepository
from .debuggers import Beside


class Folders(Protocol):
    """The server's work folders: its backend directory holds the stubs' records (``python/``)."""

    @property
    def backend_dir(self) -> Path: ...


class StuckServer(Protocol):
    """A server whose model may be stuck: its repository (configs), folders, runtime (tools beside
    Triton, signals to stubs) and state. Nothing here loads a model: the server decides that."""

    @property
    def repository(self) -> ModelRepository: ...

    @property
    def workspace(self) -> Folders: ...

    @property
    def runtime(self) -> Beside: ...

    @property
    def alive(self) -> bool: ...

    def loaded_models(self) -> list[str]: ...
