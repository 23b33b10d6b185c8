"""What ``labkit.start()``, ``labkit.reference_repository()`` and ``%load_ext labkit`` do (labkit's
``__init__`` only names the public API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import _cells
from .course import reference
from .magics import register
from .server import TritonServer, create as create_server


def start(
    repository: str | Path | None = None, *, server: str = "embedded", timeout_s: float = 60.0, **options: Any
) -> TritonServer:
    """Start Triton 23.12 and wait until it is ready; stop it with ``.stop()`` (or just exit).

    ``server="embedded"`` (default) runs the wheel's tritonserver here; ``server="docker"`` runs a
    container (``image=`` chooses it, e.g. ``"labkit/tritonserver:23.12-cpu"``, the offline CPU image that
    ``labkit image build`` makes). ``options`` go to the server, e.g. ``request_timeout_s`` (30 s) and
    ``load_timeout_s`` (120 s): how long requests and model loads may take before labkit shows where
    the model is stuck (RequestTimeoutError, LoadTimeoutError).

    Re-running the notebook cell that called it stops the server that cell started before (one line
    says so): one working server, nothing left running. Servers started in other cells keep running.
    """
    cell = _cells.cell_key(1)
    _cells.replace_earlier(cell)
    started = create_server(server, repository, **options).start(timeout_s)
    _cells.remember(cell, started)
    return started


def reference_repository() -> Path:
    """The reference model repository (add_sub and the other reference models)."""
    return reference.repository()


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext labkit` registers the %%triton_python and %%triton_cpp cell magics."""
    register(ipython)
