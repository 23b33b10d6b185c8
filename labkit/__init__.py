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
"""

import importlib as _importlib
import typing as _typing

from . import errors, exercises, gpu, native
from ._start import (
    load_ipython_extension as load_ipython_extension,  # IPython's hook for %load_ext
    reference_repository,
    start,
)
from .client.generate import generate_stream
from .client.inference import infer, infer_with_parameters, stream_infer
from .course import reference
from .course.checks import check_add_sub, check_passthrough
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
from .native import export_backend
from .observe.stats import StatsCollector, model_stats
from .python_envs import python_env
from .repository import model_config, sequence_batching
from .repository.ensemble_config import Step, ensemble_config
from .repository.repository_export import export_repository
from .server import current
from .stuck.report import debug_tools, where_stuck
from .traffic.generator import run_load
from .traffic.sequences import run_sequences

__version__ = "0.1.0"

# Names whose modules import matplotlib or ipywidgets (most of `import labkit`'s second): imported on
# first use, so that a process that never plots (the room's grader, a CLI command) does not pay for them.
_LAZY = {
    "plots": ("observe.plots", ""),
    "stats": ("observe.stats", ""),  # a module notebooks use by its old place (labkit.stats.metric)
    "Dashboard": ("observe.dashboard", "Dashboard"),
    "ensemble_timeline": ("observe.ensembles", "ensemble_timeline"),
    "serve_ensemble": ("observe.ensembles", "serve_ensemble"),
    "perf": ("observe.perf_analyzer", "perf"),
    "plot_timelines": ("observe.timelines", "plot_timelines"),
    "timeline": ("observe.timelines", "timeline"),
    "plot_sequence_slots": ("observe.sequence_timeline", "plot_sequence_slots"),
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'labkit' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = _importlib.import_module(f".{module_name}", __name__)
    value = getattr(module, attribute) if attribute else module
    globals()[name] = value
    return value


if _typing.TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from .observe import plots, stats
    from .observe.dashboard import Dashboard
    from .observe.ensembles import ensemble_timeline, serve_ensemble
    from .observe.perf_analyzer import perf
    from .observe.sequence_timeline import plot_sequence_slots
    from .observe.timelines import plot_timelines, timeline

__all__ = [
    "BuildError",
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
