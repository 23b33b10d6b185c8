"""labkit: write Triton 23.12 backends in a notebook and watch them serve.

    import labkit
    lab = labkit.start()                       # a real Triton 2.41.0, embedded
    lab.python_model("add_sub", source, cfg)   # write model.py + config.pbtxt, load
    labkit.check_add_sub(lab)                  # send a request and check the answer
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import errors, plots, reference
from .errors import (
    BuildError,
    ConfigError,
    InferenceError,
    InvalidNameError,
    LabkitError,
    ModelLoadError,
    ModelNotFoundError,
    RequestError,
    ServerError,
    ServerNotRunningError,
    ServerStartError,
    SetupError,
)
from .dashboard import Dashboard
from .load import LoadResult, run_load
from .repository import ModelConfig, ModelRepository, model_config
from .stats import ModelStats, StatsCollector, model_stats
from .requests import (
    AddSubResult,
    PassthroughResult,
    check_add_sub,
    check_passthrough,
    infer,
    infer_with_parameters,
    stream_infer,
)
from .server import EmbeddedServer, LogView, TritonServer, current
from .server import create as create_server

__version__ = "0.1.0"


def start(
    repository: str | Path | None = None, *, server: str = "embedded", timeout_s: float = 60.0, **options: Any
) -> TritonServer:
    """Start Triton 23.12 and wait until it is ready; stop it with ``.stop()`` (or just exit).

    ``server="embedded"`` (default) runs the wheel's tritonserver here; ``server="docker"`` runs a
    container (``image=`` chooses it, e.g. ``labkit.image.IMAGE`` for the offline CPU image).
    """
    return create_server(server, repository, **options).start(timeout_s)


def reference_repository() -> Path:
    """The project's model_repository/ folder (add_sub and the other reference models)."""
    return reference.repository()


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext labkit` registers the %%triton_python cell magic."""
    from .magics import register

    register(ipython)


__all__ = [
    "AddSubResult",
    "BuildError",
    "ConfigError",
    "Dashboard",
    "EmbeddedServer",
    "InferenceError",
    "InvalidNameError",
    "LabkitError",
    "LoadResult",
    "LogView",
    "ModelConfig",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelRepository",
    "ModelStats",
    "PassthroughResult",
    "RequestError",
    "ServerError",
    "ServerNotRunningError",
    "ServerStartError",
    "SetupError",
    "StatsCollector",
    "TritonServer",
    "check_add_sub",
    "check_passthrough",
    "create_server",
    "current",
    "errors",
    "infer",
    "infer_with_parameters",
    "model_config",
    "model_stats",
    "plots",
    "reference_repository",
    "run_load",
    "start",
    "stream_infer",
]
