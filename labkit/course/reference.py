"""The reference models in model_repository/: what they take, and how to get them serving."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from google.protobuf import json_format

from ..errors import SetupError
from ..native import deploy
from ..repository import ModelRepository
from ..server.base import TritonServer

# Shipped inside the package (a link to the checkout's model_repository/ in a source tree; the
# wheel holds a copy), so an installed labkit serves them too.
_REPOSITORY = (Path(__file__).resolve().parent.parent / "model_repository").resolve()


def repository() -> Path:
    """The reference model repository (add_sub and the other reference models)."""
    if not (_REPOSITORY / "add_sub" / "config.pbtxt").is_file():
        raise SetupError(
            missing=f"the reference models in {_REPOSITORY}",
            reason="not installed with labkit",
            remedy="reinstall labkit (`pip install labkit`, or `pip install -e .` in a checkout)",
        )
    return _REPOSITORY


def is_reference_repository(path: str | Path) -> bool:
    """Whether ``path`` is labkit's own reference repository, which labkit serves from a copy and never
    builds into (it is the package's data, and a checkout's tracked files)."""
    try:
        return Path(path).resolve() == repository().resolve()
    except SetupError:
        return False


def copy_into(server: TritonServer, names: Iterable[str] | None = None) -> list[str]:
    """Copy reference models (all of them by default) into the server's own repository."""
    names = list(names) if names is not None else ModelRepository(repository()).models()
    for name in names:
        server.repository.copy_model_from(repository(), name)
    return names


def add_sub_source() -> str:
    """The reference add_sub model.py: a starting point for edits in lessons, tests and benchmarks."""
    return (repository() / "add_sub" / "1" / "model.py").read_text()


_DTYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


def sample_inputs(model: str, batch: int | None = 1, server: TritonServer | None = None) -> dict[str, np.ndarray]:
    """One valid request for ``model``, made from its config: the config the server holds when
    ``server`` is given, else the reference repository's. Variable dims (-1) become 2; a model that
    batches gets a leading dimension of ``batch`` rows."""
    if server is not None:
        config = server.model_config(model)
    else:
        cfg = ModelRepository(repository()).read_config(model)
        config = json_format.MessageToDict(cfg, preserving_proto_field_name=True)
    lead = (batch,) if batch and int(config.get("max_batch_size", 0)) > 0 else ()
    inputs = {}
    for spec in config.get("input", []):
        dtype = spec.get("data_type", "TYPE_FP32").removeprefix("TYPE_")
        if dtype not in _DTYPES:
            raise KeyError(f"no sample values for datatype {dtype} (input {spec['name']!r} of {model!r})")
        shape = lead + tuple(2 if int(d) < 0 else int(d) for d in spec.get("dims", []))
        inputs[spec["name"]] = (np.arange(int(np.prod(shape))) % 100).astype(_DTYPES[dtype]).reshape(shape)
    return inputs


def serve(server: TritonServer, models: Iterable[str]) -> list[str]:
    """Copy reference models into the server's repository, build their C++ backends, and load them."""
    names = copy_into(server, models)
    deploy.load_models(server.models, names)
    return names
