"""Loads labkit refuses before Triton sees them, and loads Triton refused explained more precisely,
where labkit can tell why from the repository and Triton's state (never from the words of Triton's
message, which stay in ``reason``):

- before loading: a Python model defining a metric family (``pb_utils.MetricFamily``) under a name Triton
  already has as another kind. 23.12's python backend raises TritonModelException ("Family name already
  exists with different type") in ``initialize``, but now and then (1 load in 7 here) its stub segfaults
  doing so and Triton aborts (boost::interprocess::lock_exception), so labkit refuses such a load itself;
- after Triton refused: an ensemble whose step names a model that is not in the repository, or that did
  not load.
"""

from __future__ import annotations

import ast
from typing import Protocol

from prometheus_client.parser import text_string_to_metric_families

from ..errors import EnsembleStepError, LabkitError, MetricKindError, ModelLoadError
from ..repository import ModelRepository
from ..repository.ensemble_config import is_ensemble


class _RepositoryAndTriton(Protocol):
    """What these checks read (a server's ``models``): the repository and Triton's state."""

    @property
    def repository(self) -> ModelRepository: ...

    def index(self) -> list[dict]: ...

    def loaded_models(self) -> list[str]: ...

    def metrics_text(self) -> str: ...


_KINDS = {"COUNTER": "counter", "GAUGE": "gauge"}


def explain(models: _RepositoryAndTriton, name: str, error: ModelLoadError) -> ModelLoadError:
    """``error`` or a more specific ModelLoadError carrying the same reason and serving models."""
    try:
        better = _ensemble_step(models, name, error)
    except LabkitError:  # the server went away meanwhile: the plain refusal says enough
        return error
    return better or error


def _ensemble_step(models: _RepositoryAndTriton, name: str, error: ModelLoadError) -> EnsembleStepError | None:
    if not (models.repository.model_dir(name) / "config.pbtxt").exists():
        return None
    cfg = models.repository.read_config(name)
    if not is_ensemble(cfg):
        return None
    index = {entry["name"]: entry for entry in models.index()}
    available = models.repository.models()
    for i, step in enumerate(cfg.ensemble_scheduling.step):
        entry = index.get(step.model_name)
        if step.model_name not in available or entry is None:
            problem, reason = "not in the repository", error.reason
            remedy = "Write that model, or fix the step's model name"
        elif entry.get("state") != "READY":
            problem, reason = "did not load", str(entry.get("reason", "")).strip()
            remedy = f"Fix {step.model_name!r} (lab.load({step.model_name!r}) shows the same)"
        else:
            continue
        return EnsembleStepError(
            model=name,
            step=i,
            step_model=step.model_name,
            problem=problem,
            available=available,
            refused_by="triton",
            reason=reason,
            detail=str(error),
            serving=error.serving,
            remedy=f"{remedy}; then load {name!r} again",
        )
    return None


def metric_families(source: str) -> list[tuple[str, str]]:
    """(name, kind) of each ``MetricFamily(name=..., kind=...COUNTER|GAUGE)`` a model.py calls with a
    literal name, in the order they appear."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if not isinstance(node, ast.Call) or getattr(func, "attr", getattr(func, "id", "")) != "MetricFamily":
            continue
        given = {k.arg: k.value for k in node.keywords}
        name_node = given.get("name", node.args[0] if node.args else None)
        kind_node = given.get("kind", node.args[2] if len(node.args) > 2 else None)
        kind = _KINDS.get(getattr(kind_node, "attr", ""))
        if isinstance(name_node, ast.Constant) and isinstance(name_node.value, str) and kind:
            found.append((node.lineno, node.col_offset, name_node.value, kind))
    return [(metric, kind) for _, _, metric, kind in sorted(found)]


def _model_py(models: _RepositoryAndTriton, name: str) -> str:
    versions = models.repository.versions(name)
    path = models.repository.model_dir(name) / str(versions[-1]) / "model.py" if versions else None
    return path.read_text() if path is not None and path.is_file() else ""


def check_metric_kinds(models: _RepositoryAndTriton, name: str) -> None:
    """Raise MetricKindError if model ``name``'s model.py defines a metric family with a literal name
    that Triton has (or the same model.py defines) as another kind."""
    wanted = metric_families(_model_py(models, name))
    if not wanted:
        return
    # What Triton has now: the families on /metrics (23.12 keeps them after their model unloads), and
    # those the other loaded models define (which names the model that did).
    registered: dict[str, tuple[str, str]] = {}
    for family in text_string_to_metric_families(models.metrics_text()):
        registered[family.name] = (family.type, "")
    for other in models.loaded_models():
        if other != name:
            for metric, kind in metric_families(_model_py(models, other)):
                if registered.get(metric, (kind, ""))[0] == kind:
                    registered[metric] = (kind, other)
    seen: dict[str, str] = {}
    for metric, kind in wanted:
        before = registered.get(metric) or registered.get(metric.removesuffix("_total"))
        if before is None and metric in seen:  # the model itself defines it twice
            before = (seen[metric], name)
        seen.setdefault(metric, kind)
        if before is not None and before[0] != kind:
            raise MetricKindError(
                model=name, metric=metric, kind=kind, registered_kind=before[0], registered_by=before[1]
            )
