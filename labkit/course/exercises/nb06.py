"""Exercises of notebook 06 (one Python-based backend, many models): a parameter the backend refuses
with a clear load error, and a new optional parameter.

Both checks load models of their own that use the shared backend (the person's latest ``scaler``), with
parameters the check chooses, and remove them afterwards.
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import ModelLoadError
from ...repository import model_config
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs
from .scratch import owned_model

BACKEND = "scaler"
#: Scales a model may have (as written in its config), and the parameters of models that must not load,
#: with the value the error should name (None: there is none).
VALID = ("2.5", "-4", "1e-3")
INVALID: tuple[tuple[dict[str, str], str | None], ...] = (
    ({"scale": "three"}, "three"),
    ({}, None),
    ({"scale": "nan"}, "nan"),
    ({"scale": "inf"}, "inf"),
    ({"scale": "0"}, "0"),
    ({"scale": ""}, None),
)


def _tensors() -> dict:
    return {"inputs": [("X", "FP32", [3])], "outputs": [("Y", "FP32", [3])]}


def _raised(reason: str) -> str:
    """What initialize() raised, out of Triton's load error: "ValueError: ..." without the traceback
    (whose path, backends/scaler/model.py, would name "scale" for any message)."""
    text = reason.split(" state: ", 1)[-1].removeprefix("Internal: ")
    return text.split("\n\nAt:", 1)[0].strip()


def _load(server: TritonServer, name: str, params: dict[str, str]) -> str | None:
    """Write a model of the shared backend with ``params`` and load it; None when it loads, else what its
    initialize() raised."""
    server.repository.write_config(model_config(name, BACKEND, **_tensors(), parameters=params))
    try:
        server.load(name)
    except ModelLoadError as exc:
        return _raised(exc.reason)
    return None


@exercise("06-validate", sources=(BACKEND,))
def validate(server: TritonServer) -> None:
    x = np.array([1.5, -2.0, 4.0], np.float32)
    for number, text in enumerate(VALID, 1):
        params = {"scale": text}
        with owned_model(server, f"validate_check_good_{number}") as name:
            raised = _load(server, name, params)
            if raised is not None:
                raise NotYet(
                    f"a model with parameters {params} did not load: {_first_line(raised)}",
                    "a finite number other than 0 is a good scale, negative or not.",
                    rule="refused-good",
                )
            y = infer(server, name, {"X": x})["Y"]
        scale = float(text)
        if not any(np.allclose(y, scale * x + shift) for shift in (0, 1)):  # the notebook's backend adds one
            raise NotYet(
                f"a model with parameters {params} answered {y.tolist()} for X={x.tolist()}, not "
                f"{(scale * x).tolist()} (or that plus 1).",
                "keep computing X * scale.",
                rule="values",
            )
    for number, (params, value) in enumerate(INVALID, 1):
        with owned_model(server, f"validate_check_bad_{number}") as name:
            raised = _load(server, name, params)
        given = f"parameter scale {value!r}" if value is not None else "no parameter scale"
        if raised is None:
            raise NotYet(
                f"a model with {given} loaded; it should fail to load.",
                "check the value once, where it is read, and raise when it is unusable: a model that loads "
                "answers every request with nonsense.",
                rule="accepted",
            )
        if "scale" not in raised.lower() or (value is not None and value.lower() not in raised.lower()):
            wants = "the value it holds" if "scale" in raised.lower() else "the parameter, scale"
            raise NotYet(
                f"a model with {given} failed to load, but the error, {_first_line(raised)!r}, does not name {wants}.",
                "the person who wrote the config reads only this message: say which parameter "
                "is wrong and what it holds.",
                rule="unclear",
            )


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


@exercise("06-offset", sources=(BACKEND,))
def offset(server: TritonServer) -> None:
    x = np.array([1.0, -2.0, 10.0], np.float32)
    answers = {}
    for name, params in (("offset_check_a", {"scale": 2.5, "offset": -4}), ("offset_check_b", {"scale": 4})):
        with owned_model(server, name):
            # a config holds parameters as strings (model_config writes str(value))
            text = {key: str(value) for key, value in params.items()}
            server.repository.write_config(model_config(name, BACKEND, **_tensors(), parameters=text))
            try:
                server.load(name)
            except ModelLoadError as exc:
                raise NotYet(
                    f"a model with parameters {params} did not load: {exc.reason.strip().splitlines()[-1]}",
                    "a model without offset must load too: fall back on a value when its config has none.",
                ) from None
            answers[name] = infer(server, name, {"X": x})
            require_configured_outputs(server, name, answers[name], shown=f" (parameters {params}, X={x.tolist()})")
    with_offset, without = answers["offset_check_a"]["Y"], answers["offset_check_b"]["Y"]
    if not np.allclose(without, 4 * x):
        raise NotYet(
            f"with scale 4 and no offset, X={x.tolist()} gave {without.tolist()}, not {(4 * x).tolist()}.",
            "with no offset parameter, add nothing (the starter's fixed + 1 goes too).",
        )
    if not np.allclose(with_offset, 2.5 * x - 4):
        raise NotYet(
            f"with scale 2.5 and offset -4, X={x.tolist()} gave {with_offset.tolist()}, not {(2.5 * x - 4).tolist()}."
        )
