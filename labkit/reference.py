"""The reference models in model_repository/: what they take, and how to get them serving."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .errors import SetupError
from .server.base import TritonServer


def repository() -> Path:
    """The project's model_repository/ folder (add_sub and the other reference models)."""
    path = Path(__file__).resolve().parent.parent / "model_repository"
    if not path.is_dir():
        raise SetupError(
            f"No model_repository/ beside the labkit package ({path}); install labkit from a checkout with `pip install -e .`."
        )
    return path


def _batches(model: str) -> bool:
    config = repository() / model / "config.pbtxt"
    if not config.exists():
        return True  # a copy under another name (e.g. a Python twin): the families below all batch
    from .repository import config as _config

    return _config.read(config).max_batch_size > 0


def sample_inputs(model: str, batch: int | None = 1) -> dict[str, np.ndarray]:
    """One valid request for a reference model (or a model named after one): ``batch`` rows for
    models that batch, no batch dimension for those that do not."""
    shapes = {
        "add_sub": ({"INPUT0": (4,), "INPUT1": (4,)}, np.float32),
        "minimal": ({"IN0": (4,)}, np.int32),
        "recommended": ({"INPUT": (4, 4)}, np.float32),
        "custom": ({"INPUTTensor": (2, 128)}, np.float32),
    }
    family = next((k for k in shapes if model.startswith(k)), None)
    if family is None:
        raise KeyError(f"no sample inputs for {model!r}; known families: {', '.join(shapes)}")
    tensors, dtype = shapes[family]
    lead = (batch,) if batch and _batches(model) else ()
    return {name: np.arange(np.prod(lead + shape), dtype=dtype).reshape(lead + shape) for name, shape in tensors.items()}


def serve(server: TritonServer, models: Iterable[str]) -> list[str]:
    """Copy reference models into the server's repository, build their C++ backends, and load them."""
    from .native import deploy

    names = list(models)
    for name in names:
        server.repository.copy_model_from(repository(), name)
    deploy.load_models(server, names)
    return names
