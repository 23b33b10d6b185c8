"""A request's own parameters (Triton's parameters extension): names with string, integer or boolean values
that a backend reads (``request.parameters()`` in Python, TRITONBACKEND_RequestParameter in C++)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

#: Keys tritonclient sends itself; they are refused as request parameters.
RESERVED_PARAMETERS = ("sequence_id", "sequence_start", "sequence_end", "priority", "binary_data_output")


def request_parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """tritonclient's ``parameters=`` keyword for ``parameters``, checked here so that both protocols refuse
    the same things (tritonclient's gRPC client refuses other types, its HTTP client sends any JSON value
    and Triton refuses it) with a labkit error."""
    if not parameters:
        return {}
    for key, value in parameters.items():
        if key in RESERVED_PARAMETERS:
            raise ConfigError(
                f"parameters={{{key!r}: ...}}: {key!r} is a parameter tritonclient sets itself; use "
                f"labkit.infer's own keyword ({'sequence_id=' if key.startswith('sequence') else key + '='} ...) "
                f"where it has one, and another name for a parameter of yours.",
                field="parameters",
                value=key,
                valid=["any other name"],
            )
        if not isinstance(key, str) or not isinstance(value, (str, int)):  # bool is an int
            raise ConfigError(
                f"parameters={{{key!r}: {value!r}}}: a request parameter has a name (str) and a string, "
                f"integer or boolean value (Triton 23.12 has no other kind).",
                field="parameters",
                value=repr(value),
                valid=["str", "int", "bool"],
            )
    return {"parameters": dict(parameters)}
