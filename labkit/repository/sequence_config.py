"""Sequence batching in a ModelConfig: the control inputs a stateful Python model reads, or the implicit
state Triton keeps for a C++ one (Triton's ModelSequenceBatching message, filled through protobuf)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import json_format

from .config import ModelConfig, _data_type, pb

#: The control inputs ``sequence_batching(controls=True)`` declares: name -> (kind, how it is sent).
CONTROLS: dict[str, tuple[str, Mapping[str, object]]] = {
    "START": ("CONTROL_SEQUENCE_START", {"int32_false_true": [0, 1]}),
    "END": ("CONTROL_SEQUENCE_END", {"int32_false_true": [0, 1]}),
    "READY": ("CONTROL_SEQUENCE_READY", {"int32_false_true": [0, 1]}),
    "CORRID": ("CONTROL_SEQUENCE_CORRID", {"data_type": "TYPE_UINT64"}),
}


def sequence_batching(
    cfg: ModelConfig,
    *,
    controls: bool = True,
    state: tuple[str, str, str, Sequence[int]] | None = None,
    idle_us: int = 5_000_000,
) -> ModelConfig:
    """Make ``cfg`` (e.g. from ``model_config``) a stateful model's config; returns it.

    ``controls``: declare inputs START and END (INT32, 1 on a sequence's first / last request, else 0),
    READY (INT32, 1 on a request of a live sequence, 0 on a null request that fills an idle batch slot)
    and CORRID (UINT64, the sequence id), which Triton fills in for each request.
    ``state``: (input name, output name, datatype, dims) of implicit state that Triton keeps per sequence,
    zeros at its start: the backend reads the input and sets the output (TRITONBACKEND_StateNew/Update).
    ``idle_us``: a sequence that sends nothing for this long is ended by Triton.
    """
    spec: dict[str, Any] = {"max_sequence_idle_microseconds": idle_us}
    if controls:
        spec["control_input"] = [
            {"name": name, "control": [{"kind": kind, **how}]} for name, (kind, how) in CONTROLS.items()
        ]
    if state is not None:
        input_name, output_name, dtype, dims = state
        type_name = pb.DataType.Name(_data_type(dtype))
        spec["state"] = [
            {
                "input_name": input_name,
                "output_name": output_name,
                "data_type": type_name,
                "dims": list(dims),
                "initial_state": [{"name": "zero", "data_type": type_name, "dims": list(dims), "zero_data": True}],
            }
        ]
    cfg.sequence_batching.Clear()
    json_format.ParseDict(spec, cfg.sequence_batching)
    return cfg


def is_stateful(config: ModelConfig | Mapping[str, Any]) -> bool:
    """Whether a config (a ModelConfig, or the JSON form ``server.model_config`` returns) has sequence batching."""
    if isinstance(config, ModelConfig):
        return config.HasField("sequence_batching")
    return "sequence_batching" in config
