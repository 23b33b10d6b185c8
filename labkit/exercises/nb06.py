"""Exercises of notebook 06 (one Python-based backend, many models): a third model, and a new parameter."""

from __future__ import annotations

import numpy as np

from ..errors import ModelLoadError
from ..inference import infer
from ..repository import model_config
from ..server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs
from .scratch import owned_model

BACKEND = "scaler"
THIRD = "times_three"


def _tensors() -> dict:
    return {"inputs": [("X", "FP32", [3])], "outputs": [("Y", "FP32", [3])]}


@exercise("06-third-model", "06_python_based_backend", "serve a third model, times_three, from the shared backend",
          "write a config whose backend is \"scaler\" and whose parameters set scale to 3, then load it.")
def third_model(server: TritonServer) -> None:
    if THIRD not in server.loaded_models():
        raise NotYet(f"model {THIRD!r} is not loaded.", f"write its config, then lab.load({THIRD!r}).")
    config = server.model_config(THIRD)  # what Triton serves, not what was last written
    if config.get("backend") != BACKEND:
        raise NotYet(f"{THIRD} uses backend {config.get('backend')!r}, not the shared {BACKEND!r}.",
                     "the point is one model.py for all: name the backend in the config, write no model.py of its own.")
    written = server.repository.read_config(THIRD)
    served_scale = config.get("parameters", {}).get("scale", {}).get("string_value")
    if written.backend != config.get("backend") or {k: v.string_value for k, v in written.parameters.items()} != {
            k: v.get("string_value") for k, v in config.get("parameters", {}).items()}:
        raise NotYet(f"the config of {THIRD} written last is not the one Triton serves (that one has scale "
                     f"{served_scale}): it was not loaded since, or its load failed.",
                     f"run lab.load({THIRD!r}) and read its error, if it shows one.")
    x = np.array([0.5, -4.0, 7.0], np.float32)
    out = infer(server, THIRD, {"X": x})
    require_configured_outputs(server, THIRD, out, shown=f" (for X={x.tolist()})")
    y = out["Y"]
    if not np.allclose(y, 3 * x) and not np.allclose(y, 3 * x + 1):  # the notebook's backend may still add one
        raise NotYet(f"{THIRD} answered {y.tolist()} for X={x.tolist()} (its scale parameter is "
                     f"{float(served_scale or 'nan'):g}); three times X is {(3 * x).tolist()}.",
                     "the parameters in the config decide the factor: change scale, write the config, load the model again.")


@exercise("06-offset", "06_python_based_backend", "give the shared backend an optional offset parameter",
          "in initialize(), read config[\"parameters\"].get(\"offset\") the way scale is read, with 0 when it is "
          "missing, and compute x * self.scale + self.offset.", sources=(BACKEND,))
def offset(server: TritonServer) -> None:
    x = np.array([1.0, -2.0, 10.0], np.float32)
    answers = {}
    for name, params in (("offset_check_a", {"scale": 2.5, "offset": -4}), ("offset_check_b", {"scale": 4})):
        with owned_model(server, name):
            server.repository.write_config(model_config(name, BACKEND, **_tensors(), parameters=params))
            try:
                server.load(name)
            except ModelLoadError as exc:
                raise NotYet(f"a model with parameters {params} did not load: {exc.reason.strip().splitlines()[-1]}",
                             "a model without offset must load too: use .get(\"offset\") and a default of 0.") from None
            answers[name] = infer(server, name, {"X": x})
            require_configured_outputs(server, name, answers[name], shown=f" (parameters {params}, X={x.tolist()})")
    with_offset, without = answers["offset_check_a"]["Y"], answers["offset_check_b"]["Y"]
    if not np.allclose(without, 4 * x):
        raise NotYet(f"with scale 4 and no offset, X={x.tolist()} gave {without.tolist()}, not {(4 * x).tolist()}.",
                     "with no offset parameter, add nothing: the default is 0 (drop the fixed + 1).")
    if not np.allclose(with_offset, 2.5 * x - 4):
        raise NotYet(f"with scale 2.5 and offset -4, X={x.tolist()} gave {with_offset.tolist()}, "
                     f"not {(2.5 * x - 4).tolist()}.")
