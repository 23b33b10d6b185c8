"""Launchers for Triton 23.12 behind one interface (TritonServer)."""

from .base import TritonServer, current
from .embedded import EmbeddedServer
from .logs import LogView

__all__ = ["EmbeddedServer", "LogView", "TritonServer", "current"]
