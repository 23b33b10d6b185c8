"""Does a request fit a model's inputs? Pure functions over the config Triton reports (JSON form).

Triton 2.41 refuses a bad request and a failing backend with the same HTTP status, so labkit does
not guess from the refusal: it compares what was sent with the model's config and names what differs.
"""

from __future__ import annotations

from collections.abc import Sequence

#: One sent tensor: (name, datatype as the protocol spells it, shape).
Sent = tuple[str, str, Sequence[int]]


def _dtype(config_type: str) -> str:
    name = config_type.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def _dims(spec: dict) -> list[int]:
    return [int(d) for d in spec.get("dims", [])]


def describe_inputs(config: dict) -> str:
    """The model's inputs in one line, e.g. ``INPUT0 FP32 [batch] + [4], INPUT1 FP32 [batch] + [4]``."""
    batch = "[batch] + " if int(config.get("max_batch_size", 0)) > 0 else ""
    return (
        ", ".join(f"{i['name']} {_dtype(i['data_type'])} {batch}{_dims(i)}" for i in config.get("input", []))
        or "no inputs"
    )


def describe_sent(sent: Sequence[Sent]) -> str:
    return ", ".join(f"{name} {dtype} {list(shape)}" for name, dtype, shape in sent) or "no inputs"


def _shape_fits(shape: Sequence[int], dims: list[int]) -> bool:
    return len(shape) == len(dims) and all(d == -1 or d == s for s, d in zip(shape, dims))


def mismatches(config: dict, sent: Sequence[Sent]) -> list[str]:
    """What in ``sent`` does not fit the model's inputs, one phrase each; empty when it all fits."""
    specs = {i["name"]: i for i in config.get("input", [])}
    max_batch = int(config.get("max_batch_size", 0))
    problems = []
    names = [name for name, _, _ in sent]
    for name in names:
        if name not in specs:
            problems.append(f"the model has no input {name!r}")
    for name, spec in specs.items():
        if name not in names and not spec.get("optional", False):
            problems.append(f"input {name!r} is missing")
    for name, dtype, shape in sent:
        spec = specs.get(name)
        if spec is None:
            continue
        if dtype != _dtype(spec["data_type"]):
            problems.append(f"{name} is {dtype}, the model takes {_dtype(spec['data_type'])}")
        if "reshape" in spec:
            continue  # Triton reshapes it: the sent shape follows other rules
        dims = _dims(spec)
        if max_batch > 0:
            if not shape or not _shape_fits(shape[1:], dims):
                problems.append(f"{name} has shape {list(shape)}, the model takes [batch] + {dims}")
            elif shape[0] > max_batch:
                problems.append(f"{name} carries a batch of {shape[0]}, more than max_batch_size {max_batch}")
        elif not _shape_fits(shape, dims):
            problems.append(f"{name} has shape {list(shape)}, the model takes {dims}")
    return problems


def payload_bytes(tensors: list) -> int:
    """The bytes of data a request's tensors carry (tritonclient keeps them on private attributes)."""
    total = 0
    for tensor in tensors:
        getter = getattr(tensor, "_get_binary_data", None) or getattr(tensor, "_get_content", None)
        raw = getter() if getter is not None else None
        total += len(raw) if raw is not None else 0
    return total
