"""labkit: write Triton 23.12 backends in a notebook and watch them serve.

    import labkit
    lab = labkit.start()                       # a real Triton 2.41.0, embedded
    lab.python_model("add_sub", source, cfg)   # write model.py + config.pbtxt, load
    labkit.check_add_sub(lab)                  # send a request and check the answer
    labkit.perf(lab, "add_sub")                # perf_analyzer 23.12 across concurrency 1, 2, 4, 8
    lab.unstick("add_sub")                     # after a RequestTimeoutError: end the stuck request, reload
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _cells, errors, exercises, gpu, native, reference
from .checks import AddSubResult, PassthroughResult, check_add_sub, check_passthrough
from .errors import (
    AnswerMismatchError,
    BackendClashError,
    BuildError,
    ConfigError,
    EngineError,
    EnsembleStepError,
    GpuUnavailableError,
    InferenceError,
    InputSizeError,
    InvalidNameError,
    LabkitError,
    LoadTimeoutError,
    MetricKindError,
    ModelLoadError,
    ModelNotFoundError,
    OutputNameError,
    PerfAnalyzerError,
    PortTakenError,
    RepositoryError,
    RepositoryWriteError,
    RequestError,
    RequestInterruptedError,
    RequestTimeoutError,
    RoomSettingsError,
    SubmissionError,
    BoardError,
    HubError,
    SequenceError,
    ServerError,
    ServerNotRunningError,
    WaitTimeoutError,
    ServerStartError,
    SetupError,
    TraceError,
    UnknownExerciseError,
    UnknownProtocolError,
    UnstableMeasurementError,
    CourseError,
)
from .generate import generate_stream
from .inference import infer, infer_with_parameters, stream_infer
from .load import Load, LoadErrorRecord, LoadResult, run_load
from .sequences import run_sequences
from .magics import register as _register_magics
from .native import export_backend
from .repository import ModelConfig, ModelRepository, model_config, sequence_batching
from .repository.ensemble import Step, ensemble_config
from .server import EmbeddedServer, LogView, ServerConfig, TritonServer, current
from .server import create as create_server
from .stats import ModelStats, StatsCollector, model_stats
from .transport import Transport
from .stuck.report import debug_tools, where_stuck

__version__ = "0.1.0"

# Names whose modules import matplotlib or ipywidgets (most of `import labkit`'s second): imported on
# first use, so that a process that never plots (the room's grader, a CLI command) does not pay for them.
_LAZY = {
    "plots": ("plots", ""),
    "Dashboard": ("dashboard", "Dashboard"),
    "EnsembleTimeline": ("ensembles", "EnsembleTimeline"),
    "ensemble_timeline": ("ensembles", "ensemble_timeline"),
    "serve_ensemble": ("ensembles", "serve_ensemble"),
    "PerfStep": ("perf_analyzer", "PerfStep"),
    "PerfSweep": ("perf_analyzer", "PerfSweep"),
    "perf": ("perf_analyzer", "perf"),
    "Timeline": ("timelines", "Timeline"),
    "plot_timelines": ("timelines", "plot_timelines"),
    "timeline": ("timelines", "timeline"),
    "plot_sequence_slots": ("sequence_timeline", "plot_sequence_slots"),
    "sequence_slots": ("sequence_timeline", "sequence_slots"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'labkit' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(f".{module_name}", __name__)
    value = getattr(module, attribute) if attribute else module
    globals()[name] = value
    return value


if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from . import plots
    from .dashboard import Dashboard
    from .ensembles import EnsembleTimeline, ensemble_timeline, serve_ensemble
    from .perf_analyzer import PerfStep, PerfSweep, perf
    from .sequence_timeline import plot_sequence_slots, sequence_slots
    from .timelines import Timeline, plot_timelines, timeline


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
    _register_magics(ipython)


__all__ = [
    "AddSubResult",
    "AnswerMismatchError",
    "BackendClashError",
    "BuildError",
    "ConfigError",
    "Dashboard",
    "EmbeddedServer",
    "EngineError",
    "EnsembleStepError",
    "EnsembleTimeline",
    "InferenceError",
    "InputSizeError",
    "InvalidNameError",
    "LabkitError",
    "Load",
    "LoadErrorRecord",
    "LoadResult",
    "LoadTimeoutError",
    "MetricKindError",
    "LogView",
    "ModelConfig",
    "ModelLoadError",
    "ModelNotFoundError",
    "OutputNameError",
    "ModelRepository",
    "ModelStats",
    "PassthroughResult",
    "PerfAnalyzerError",
    "PortTakenError",
    "PerfStep",
    "PerfSweep",
    "RepositoryError",
    "RepositoryWriteError",
    "RequestError",
    "RequestInterruptedError",
    "RequestTimeoutError",
    "RoomSettingsError",
    "SubmissionError",
    "BoardError",
    "HubError",
    "SequenceError",
    "ServerError",
    "ServerConfig",
    "ServerNotRunningError",
    "WaitTimeoutError",
    "ServerStartError",
    "SetupError",
    "GpuUnavailableError",
    "gpu",
    "StatsCollector",
    "Step",
    "Timeline",
    "TraceError",
    "Transport",
    "TritonServer",
    "UnknownExerciseError",
    "CourseError",
    "UnknownProtocolError",
    "UnstableMeasurementError",
    "check_add_sub",
    "check_passthrough",
    "create_server",
    "current",
    "debug_tools",
    "errors",
    "exercises",
    "ensemble_config",
    "ensemble_timeline",
    "export_backend",
    "generate_stream",
    "infer",
    "infer_with_parameters",
    "model_config",
    "model_stats",
    "native",
    "perf",
    "plot_sequence_slots",
    "plot_timelines",
    "plots",
    "reference",
    "reference_repository",
    "run_load",
    "run_sequences",
    "sequence_batching",
    "sequence_slots",
    "serve_ensemble",
    "start",
    "stream_infer",
    "timeline",
    "where_stuck",
]
