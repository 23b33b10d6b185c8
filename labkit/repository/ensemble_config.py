"""Ensemble configs: a model whose requests Triton passes through other models, step by step
(``platform: "ensemble"`` and ``ensemble_scheduling``), built as Triton's own ModelConfig message and
written as protobuf text format like every other config.pbtxt."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import EnsembleStepError, LabkitError
from .config import ModelConfig, TensorSpec, model_config
from .repository import ModelRepository


@dataclass(frozen=True)
class Step:
    """One step: ``model`` reads ``inputs`` (its input name -> ensemble tensor) and writes ``outputs``
    (its output name -> ensemble tensor). Tensors that are not the ensemble's own inputs or outputs
    are intermediate: Triton passes them from one step to the next inside the server."""

    model: str
    inputs: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)
    version: int = -1  # -1: the latest version Triton serves


def ensemble_config(
    name: str,
    inputs: Iterable[TensorSpec],
    outputs: Iterable[TensorSpec],
    steps: Iterable[Step],
    *,
    max_batch_size: int = 0,
) -> ModelConfig:
    """A complete ensemble ModelConfig: the ensemble's tensors as in ``model_config``, then the steps
    in ``ensemble_scheduling``. An ensemble has no backend and no instances: Triton's ensemble
    scheduler runs it, and each step runs on its own model's instances."""
    cfg = model_config(name, "ensemble", inputs, outputs, max_batch_size=max_batch_size)
    cfg.ClearField("backend")
    cfg.ClearField("instance_group")
    cfg.platform = "ensemble"
    for step in steps:
        entry = cfg.ensemble_scheduling.step.add(model_name=step.model, model_version=step.version)
        entry.input_map.update(step.inputs)
        entry.output_map.update(step.outputs)
    return cfg


def is_ensemble(cfg: ModelConfig) -> bool:
    return cfg.platform == "ensemble"


def step_models(cfg: ModelConfig) -> list[str]:
    """The models an ensemble config names, in step order (each once)."""
    return list(dict.fromkeys(step.model_name for step in cfg.ensemble_scheduling.step))


def check_steps(repository: ModelRepository, cfg: ModelConfig) -> None:
    """Refuse an ensemble whose steps name a model the repository lacks, or a tensor that the step's
    model does not have (EnsembleStepError, refused_by="labkit"), before anything is written."""
    available = repository.models()
    for i, step in enumerate(cfg.ensemble_scheduling.step):
        what = dict(model=cfg.name, step=i, step_model=step.model_name, available=available)
        if step.model_name not in available:
            raise EnsembleStepError(
                remedy="Write that model first, or fix the step's model name",
                problem="not in the repository",
                **what,
            )
        try:
            own = repository.read_config(step.model_name)
        except LabkitError:
            continue  # its own config is broken: loading it says why
        for mapping, tensors, kind in ((step.input_map, own.input, "input"), (step.output_map, own.output, "output")):
            names = [t.name for t in tensors]
            for tensor in mapping:
                if tensor not in names:
                    raise EnsembleStepError(
                        remedy="The map's keys are the step model's tensor names, its values the ensemble's",
                        tensors=names,
                        problem=f"no such {kind}",
                        tensor=tensor,
                        **what,
                    )
