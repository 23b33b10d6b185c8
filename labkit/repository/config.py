"""Model configs as Triton's own ModelConfig protobuf messages, read and written as text format."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as pb

from ..errors import ConfigError

if TYPE_CHECKING:
    from google.protobuf.message import Message

    class ModelConfig(Message):
        """What mypy knows of Triton's ModelConfig message: tritonclient's generated model_config_pb2
        has no type stubs (its classes are built at import), so this names the message's fields.
        Nested messages and repeated fields are Any, as protobuf itself ships no types here."""

        name: str
        platform: str
        backend: str
        default_model_filename: str
        max_batch_size: int
        version_policy: Any
        input: Any
        output: Any
        batch_input: Any
        batch_output: Any
        optimization: Any
        dynamic_batching: Any
        sequence_batching: Any
        ensemble_scheduling: Any
        instance_group: Any
        cc_model_filenames: Any
        metric_tags: Any
        parameters: Any
        model_warmup: Any
        model_operations: Any
        model_transaction_policy: Any
        model_repository_agents: Any
        response_cache: Any

        def __init__(self, **fields: Any) -> None: ...
        def ClearField(self, field_name: str) -> None: ...
        def HasField(self, field_name: str) -> bool: ...

else:
    ModelConfig = pb.ModelConfig

#: A tensor spec: (name, datatype, dims), e.g. ("INPUT0", "FP32", [4]).
TensorSpec = tuple[str, str, Sequence[int]]


def _data_type(name: str) -> int:
    key = name.upper()
    key = key if key.startswith("TYPE_") else f"TYPE_{key}"
    if key == "TYPE_BYTES":
        key = "TYPE_STRING"  # the protocol says BYTES, the config enum says STRING
    try:
        return pb.DataType.Value(key)
    except ValueError:
        valid = [n[5:] for n in pb.DataType.keys() if n != "TYPE_INVALID"]
        raise ConfigError(
            field="data_type", value=name, valid=valid, problem="is not a datatype", remedy="use one of the valid ones"
        ) from None


def model_config(
    name: str,
    backend: str,
    inputs: Iterable[TensorSpec],
    outputs: Iterable[TensorSpec],
    *,
    max_batch_size: int = 0,
    dynamic_batching: bool | Mapping[str, object] = False,
    instances: int = 1,
    kind: str = "CPU",
    gpus: Sequence[int] | None = None,
    parameters: Mapping[str, object] | None = None,
) -> ModelConfig:
    """Build a complete ModelConfig (labkit runs Triton with auto-complete off, so configs must be whole).

    ``dynamic_batching`` is True for Triton's defaults, or a mapping of DynamicBatching fields,
    e.g. ``{"max_queue_delay_microseconds": 2000, "preferred_batch_size": [4, 8]}``.
    ``kind`` is "CPU" or "GPU" (KIND_GPU needs a GPU at load time); ``gpus`` pins a GPU group's
    instances to those devices (``kind="GPU", gpus=[0]``: ``instances`` on GPU 0; Triton puts that
    many on each GPU listed). Python models get their inputs in CPU memory unless the config says
    ``parameters={"FORCE_CPU_ONLY_INPUT_TENSORS": "no"}``.
    """
    cfg = ModelConfig(name=name, backend=backend, max_batch_size=max_batch_size)
    for spec, field in ((inputs, cfg.input), (outputs, cfg.output)):
        for tname, dtype, dims in spec:
            field.add(name=tname, data_type=_data_type(dtype), dims=list(dims))
    kind_value = f"KIND_{kind.upper()}"
    if kind_value not in pb.ModelInstanceGroup.Kind.keys():
        raise ConfigError(
            field="kind",
            value=kind,
            valid=["CPU", "GPU", "MODEL", "AUTO"],
            problem="is not an instance kind",
            remedy="use one of the valid ones",
        )
    group = cfg.instance_group.add(count=instances, kind=pb.ModelInstanceGroup.Kind.Value(kind_value))
    if gpus is not None:
        ids = list(gpus)
        if (
            kind_value != "KIND_GPU"
            or not ids
            or any(not isinstance(g, int) or isinstance(g, bool) or g < 0 for g in ids)
        ):
            raise ConfigError(
                field="gpus",
                value=gpus,
                valid=["kind='GPU'", "[0]", "[0, 1]"],
                problem="are not device numbers of a kind='GPU' group",
                remedy="give device numbers (e.g. [0]) with kind='GPU'; Triton pins only GPU instance groups to devices",
            )
        group.gpus.extend(ids)
    if dynamic_batching:
        cfg.dynamic_batching.SetInParent()
        if isinstance(dynamic_batching, Mapping):
            json_format.ParseDict(dict(dynamic_batching), cfg.dynamic_batching)
    for key, value in (parameters or {}).items():
        cfg.parameters[key].string_value = str(value)
    return cfg


def to_text(cfg: ModelConfig) -> str:
    return text_format.MessageToString(cfg)


def parse(text: str, source: str = "config.pbtxt") -> ModelConfig:
    """Parse config text; an unknown field or a wrong type raises ConfigError naming it."""
    try:
        return text_format.Parse(text, ModelConfig())
    except text_format.ParseError as exc:
        raise ConfigError(
            field=_field_of(str(exc)),
            source=source,
            problem=str(exc),
            remedy="Fix that line; field names are those of Triton's ModelConfig",
        ) from None


def _field_of(parse_error: str) -> str:
    """The field a protobuf text-format ParseError is about: a misspelt name, or the field whose value
    has the wrong type ("" if its words say neither)."""
    named = re.search(r'has no field named "(\w+)"', parse_error) or re.search(r"'(\w+)\s*:", parse_error)
    return named.group(1) if named else ""


def read(path: Path) -> ModelConfig:
    return parse(Path(path).read_text(), str(path))


def check_complete(cfg: ModelConfig, source: str = "config") -> None:
    """Refuse configs Triton would only accept with auto-complete on."""
    missing = [f for f in ("name", "backend") if not getattr(cfg, f)]
    if cfg.platform == "ensemble":  # Triton's ensemble scheduler is named by platform, not backend
        missing = [f for f in missing if f != "backend"]
    if not cfg.input:
        missing.append("input")
    if not cfg.output:
        missing.append("output")
    if missing:
        raise ConfigError(
            lacks=missing,
            source=source,
            remedy=(
                "labkit runs Triton with auto-complete off (it avoids a load hang in 23.12), so every config must "
                "name its backend, inputs and outputs"
            ),
        )
