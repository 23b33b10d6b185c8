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
                problem="is a parameter tritonclient sets itself",
                remedy=(
                    f"use labkit.infer's own keyword ({'sequence_id=' if key.startswith('sequence') else key + '='} "
                    "...) where it has one, and another name for a parameter of yours"
                ),
                field="parameters",
                value=key,
                valid=["any other name"],
            )
        if not isinstance(key, str) or not isinstance(value, (str, int)):  # bool is an int
            raise ConfigError(
                problem=f"parameter {key!r} is not a name (str) with a string, integer or boolean value",
                remedy="give one of those (Triton 23.12 has no other kind)",
                field="parameters",
                value=repr(value),
                valid=["str", "int", "bool"],
            )
    return {"parameters": dict(parameters)}
