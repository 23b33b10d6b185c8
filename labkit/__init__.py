"""labkit: write Triton 23.12 backends in a notebook and watch them serve::

    import labkit
    lab = labkit.start()                       # a real Triton 2.41.0, embedded
    lab.python_model("add_sub", source, cfg)   # write model.py + config.pbtxt, load
    labkit.check_add_sub(lab)                  # send a request and check the answer
    labkit.perf(lab, "add_sub")                # perf_analyzer 23.12 across concurrency 1, 2, 4, 8
    lab.unstick("add_sub")                     # after a RequestTimeoutError: end the stuck request, reload

``__all__`` names what a notebook calls; every error class is in ``labkit.errors`` (the ones a notebook
catches are here too), and the wings hold the rest: ``labkit.client`` (requests), ``labkit.traffic`` (load
generation), ``labkit.observe`` (statistics, timelines, plots), ``labkit.course`` (the course), and
``server``, ``repository``, ``native``, ``docker``, ``gpu``, ``stuck``, ``room``, ``lessons``, ``exercises``.
Only the errors are imported with ``labkit``: every other name, and every wing by its name, on first use.
Notebooks import only this surface: ``labkit``, the modules in ``__all__``, ``labkit.lessons`` and
``labkit.exercises``.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import typing as _typing

from . import errors
from .errors import (
    BuildError,
    InferenceError,
    LabkitError,
    LoadTimeoutError,
    ModelLoadError,
    RequestError,
    RequestTimeoutError,
    SequenceError,
)

__version__ = "0.1.0"

# Every other name is imported on first use (PEP 562), so that importing one wing (the room's board, a CLI
# command, the grader) does not load the server, the clients and the plots: name -> (module, attribute; ""
# for the module itself).
_LAZY = {
    "exercises": ("exercises", ""),
    "gpu": ("gpu", ""),
    "native": ("native", ""),
    "plots": ("observe.plots", ""),
    "reference": ("course.reference", ""),
    "stats": ("observe.stats", ""),  # a module notebooks use by its old place (labkit.stats.metric)
    "CPU_IMAGE": ("docker.cpu_image", "IMAGE"),  # the offline CPU Triton image (`labkit image build`)
    "reference_repository": ("_start", "reference_repository"),
    "start": ("_start", "start"),
    "generate_stream": ("client.generate", "generate_stream"),
    "infer": ("client.inference", "infer"),
    "infer_with_parameters": ("client.inference", "infer_with_parameters"),
    "stream_infer": ("client.inference", "stream_infer"),
    "check_add_sub": ("course.checks", "check_add_sub"),
    "check_passthrough": ("course.checks", "check_passthrough"),
    "export_backend": ("native", "export_backend"),
    "StatsCollector": ("observe.stats", "StatsCollector"),
    "model_stats": ("observe.stats", "model_stats"),
    "python_env": ("python_envs", "python_env"),
    "model_config": ("repository", "model_config"),
    "sequence_batching": ("repository", "sequence_batching"),
    "Step": ("repository.ensemble_config", "Step"),
    "ensemble_config": ("repository.ensemble_config", "ensemble_config"),
    "export_repository": ("repository.repository_export", "export_repository"),
    "current": ("server", "current"),
    "debug_tools": ("stuck.report", "debug_tools"),
    "where_stuck": ("stuck.report", "where_stuck"),
    "run_load": ("traffic.generator", "run_load"),
    "run_sequences": ("traffic.sequences", "run_sequences"),
    "Dashboard": ("observe.dashboard", "Dashboard"),
    "ensemble_timeline": ("observe.ensembles", "ensemble_timeline"),
    "serve_ensemble": ("observe.ensembles", "serve_ensemble"),
    "perf": ("observe.perf_analyzer", "perf"),
    "plot_timelines": ("observe.timelines", "plot_timelines"),
    "timeline": ("observe.timelines", "timeline"),
    "plot_sequence_slots": ("observe.sequence_timeline", "plot_sequence_slots"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        module = _importlib.import_module(f".{module_name}", __name__)
        value = getattr(module, attribute) if attribute else module
    elif not name.startswith("_") and _importlib_util.find_spec(f"{__name__}.{name}") is not None:
        value = _importlib.import_module(f".{name}", __name__)  # a wing by its name (labkit.repository.config)
    else:
        raise AttributeError(f"module 'labkit' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: _typing.Any) -> None:
    """IPython's hook for ``%load_ext labkit``: the magics, imported only then."""
    from ._start import load_ipython_extension as load

    load(ipython)


if _typing.TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from . import exercises, gpu, native
    from ._start import reference_repository, start
    from .client.generate import generate_stream
    from .client.inference import infer, infer_with_parameters, stream_infer
    from .course import reference
    from .course.checks import check_add_sub, check_passthrough
    from .docker.cpu_image import IMAGE as CPU_IMAGE
    from .native import export_backend
    from .observe import plots, stats
    from .observe.dashboard import Dashboard
    from .observe.ensembles import ensemble_timeline, serve_ensemble
    from .observe.perf_analyzer import perf
    from .observe.sequence_timeline import plot_sequence_slots
    from .observe.stats import StatsCollector, model_stats
    from .observe.timelines import plot_timelines, timeline
    from .python_envs import python_env
    from .repository import model_config, sequence_batching
    from .repository.ensemble_config import Step, ensemble_config
    from .repository.repository_export import export_repository
    from .server import current
    from .stuck.report import debug_tools, where_stuck
    from .traffic.generator import run_load
    from .traffic.sequences import run_sequences

__all__ = [
    "BuildError",
    "CPU_IMAGE",
    "Dashboard",
    "InferenceError",
    "LabkitError",
    "LoadTimeoutError",
    "ModelLoadError",
    "RequestError",
    "RequestTimeoutError",
    "SequenceError",
    "StatsCollector",
    "Step",
    "check_add_sub",
    "check_passthrough",
    "current",
    "debug_tools",
    "ensemble_config",
    "ensemble_timeline",
    "errors",
    "exercises",
    "export_backend",
    "export_repository",
    "generate_stream",
    "gpu",
    "infer",
    "infer_with_parameters",
    "model_config",
    "model_stats",
    "native",
    "perf",
    "plot_sequence_slots",
    "plot_timelines",
    "plots",
    "python_env",
    "reference",
    "reference_repository",
    "run_load",
    "run_sequences",
    "sequence_batching",
    "serve_ensemble",
    "start",
    "stats",
    "stream_infer",
    "timeline",
    "where_stuck",
]
