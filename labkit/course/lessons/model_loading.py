"""Lesson: the Python backend's model loading API, called from a BLS model.

``pb_utils.load_model(model_name, config=..., files=...)``, ``pb_utils.unload_model(model_name)`` and
``pb_utils.is_model_ready(model_name)`` are Triton's C API for model control
(TRITONSERVER_ServerLoadModelWithParameters, ...UnloadModel, ...ModelIsReady) seen from a stub. ``bls_loader``
loads ``scaler_from_bls``,
a model that exists nowhere in the repository: its config comes as JSON (``config=``) and its model.py as
bytes (``files={"file:1/model.py": ...}``); Triton writes them to a folder of its own. Each request sets the
factor through the config, calls the model, and unloads it when asked to. A load that carries a config
always reloads the model, even with the config it already has (core r23.12,
src/model_repository_manager.cc:1410-1418), so bls_loader loads only when the model is not ready or the
factor changed.

Triton allows these calls only under explicit model control (labkit always starts Triton with
``--model-control-mode=explicit``): otherwise core refuses with "explicit model load / unload is not allowed
if polling is enabled" (core r23.12, src/model_repository_manager.cc:640-643).

    lab = labkit.start()
    model_loading.setup(lab)
    print(model_loading.call(lab, factor=2.0, unload=False))
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...repository import model_config
from ...server.base import TritonServer
from .outcome import Outcome

MODEL = "bls_loader"
LOADED = "scaler_from_bls"

#: The two files bls_loader hands to Triton, kept beside its model.py: scaler_from_bls's model.py, and its
#: config as JSON (Triton's ModelConfig in JSON form, whole since auto-complete is off) without the factor.
SCALER_FILE, SCALER_CONFIG_FILE = "scaler.py", "scaler_config.json"

SCALER_SOURCE = '''"""scaler_from_bls: Y = X * the config's parameter "factor"."""
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.factor = float(config["parameters"]["factor"]["string_value"])

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(request, "X").as_numpy() * self.factor)]
            )
            for request in requests
        ]
'''

SCALER_CONFIG = {
    "name": LOADED,
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [4]}],
    "instance_group": [{"kind": "KIND_CPU", "count": 1}],
}

SOURCE = '''"""bls_loader: loads scaler_from_bls with this request's FACTOR, asks it for X * FACTOR, and unloads it
if UNLOAD is true. READY: is scaler_from_bls ready before the load, after the call, and at the end?"""
import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

LOADED = "scaler_from_bls"
HERE = Path(__file__).parent  # scaler.py and scaler_config.json lie beside this model.py


class TritonPythonModel:
    def initialize(self, args):
        self.model_py = (HERE / "scaler.py").read_bytes()
        self.config = json.loads((HERE / "scaler_config.json").read_text())
        self.factor = None  # the factor scaler_from_bls was last loaded with

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            factor = float(pb_utils.get_input_tensor_by_name(request, "FACTOR").as_numpy()[0])
            unload = bool(pb_utils.get_input_tensor_by_name(request, "UNLOAD").as_numpy()[0])
            before = pb_utils.is_model_ready(model_name=LOADED)
            # A load with a config (or files) always reloads, even the same config: load only when needed.
            if not before or factor != self.factor:
                # The config as JSON, the files as bytes under "file:<version>/<path>": no folder in the repository.
                config = dict(self.config, parameters={"factor": {"string_value": str(factor)}})
                pb_utils.load_model(model_name=LOADED, config=json.dumps(config), files={"file:1/model.py": self.model_py})
                self.factor = factor
            answer = pb_utils.InferenceRequest(
                model_name=LOADED, requested_output_names=["Y"], inputs=[pb_utils.Tensor("X", x.as_numpy())]
            ).exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(answer.error().message())))
                continue
            after_call = pb_utils.is_model_ready(model_name=LOADED)
            if unload:
                pb_utils.unload_model(model_name=LOADED)
            at_end = pb_utils.is_model_ready(model_name=LOADED)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.get_output_tensor_by_name(answer, "Y"),
                pb_utils.Tensor("READY", np.array([before, after_call, at_end], dtype=bool)),
            ]))
        return responses
'''

CONFIG = model_config(
    MODEL,
    "python",
    [("X", "FP32", [4]), ("FACTOR", "FP32", [1]), ("UNLOAD", "BOOL", [1])],
    [("Y", "FP32", [4]), ("READY", "BOOL", [3])],
)


def setup(server: TritonServer, source: str = SOURCE) -> None:
    """Serve bls_loader, with scaler.py and scaler_config.json beside its model.py (scaler_from_bls is its to load)."""
    server.repository.write_file(MODEL, SCALER_FILE, SCALER_SOURCE)
    server.repository.write_file(MODEL, SCALER_CONFIG_FILE, json.dumps(SCALER_CONFIG, indent=2) + "\n")
    server.python_model(MODEL, source, CONFIG)


@dataclass
class Loaded:
    """One request to bls_loader, and what the server said about scaler_from_bls afterwards."""

    x: list[float]
    factor: float
    unload: bool
    y: list[float]
    ready: list[bool]  # seen by bls_loader: before the load, after the call, at the end
    serving: bool  # scaler_from_bls ready after the request, asked from outside (GET v2/models/<name>/ready)
    factor_loaded: str | None  # the factor parameter of the config Triton holds for it, if it serves
    in_index: bool  # listed by the repository index (it has no folder in the repository: never)
    loads: int  # times Triton logged "successfully loaded" for it during the request

    @property
    def ok(self) -> bool:
        return (
            np.allclose(self.y, np.asarray(self.x) * self.factor)
            and self.ready[1]
            and self.ready[2] == self.serving == (not self.unload)
            and (self.factor_loaded == str(self.factor) if self.serving else self.factor_loaded is None)
            and not self.in_index
        )

    def __repr__(self) -> str:
        before, after_call, at_end = self.ready
        return (
            f"{MODEL}: FACTOR {self.factor}, UNLOAD {self.unload}: Y = {self.y}\n"
            f"  {LOADED} ready before the load: {before}, after the call: {after_call}, at the end: {at_end}\n"
            f"  loads Triton logged during the request: {self.loads}\n"
            f"  ready, asked from outside: {self.serving}"
            + (f" (the factor in the config Triton holds: {self.factor_loaded})" if self.serving else "")
            + f"; in the repository index: {self.in_index}"
        )


def call(server: TritonServer, factor: float, unload: bool, x: list[float] | None = None) -> Loaded:
    """One request; then the server's own view of scaler_from_bls (index and loaded config)."""
    values = x if x is not None else [1.0, 2.0, 3.0, 4.0]
    mark = server.logs.mark()
    out = infer(
        server,
        MODEL,
        {
            "X": np.asarray(values, np.float32),
            "FACTOR": np.array([factor], np.float32),
            "UNLOAD": np.array([unload], bool),
        },
    )
    serving = server.models.is_model_ready(LOADED)
    loaded = server.model_config(LOADED)["parameters"]["factor"]["string_value"] if serving else None
    in_index = any(m["name"] == LOADED for m in server.models.index())
    server.logs.settle()  # Triton's line about the load can land just after the answer
    loads = server.logs.since(mark).count(f"successfully loaded '{LOADED}'")
    return Loaded(values, factor, unload, out["Y"].tolist(), out["READY"].tolist(), serving, loaded, in_index, loads)


def run(server: TritonServer) -> Outcome:
    """Loaded from BLS with a config and files, reloaded with another config, then unloaded."""
    setup(server)
    steps = [call(server, 2.0, unload=False), call(server, 2.0, unload=False), call(server, 3.0, unload=True)]
    first, same, other = steps
    ok = all(s.ok for s in steps) and not first.ready[0] and first.loads == 1 and same.loads == 0 and other.loads == 1
    return Outcome(ok, {"steps": [repr(s) for s in steps]})
