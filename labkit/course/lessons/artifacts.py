"""Lesson: a C++ backend that reads a file from its model's folder when the model loads.

TRITONBACKEND_ModelRepository (``labkit::model_directory``) gives the folder that holds the model's
config.pbtxt; framework backends read their weights from there. This backend reads ``scale.txt``
once, at model initialization, and multiplies its FP32 input by that number. Without the file the
load fails, and the error says which file is missing where.

    lab = labkit.start()
    artifacts.setup(lab, scale=2.5)
    print(artifacts.scaled(lab))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...errors import ModelLoadError
from ...repository import model_config
from ...server.base import TritonServer
from .outcome import Outcome

BACKEND = "filescale"
MODEL = "filescale_fp32"
ARTIFACT = "scale.txt"

SOURCE = r"""// filescale: OUT0 = IN0 * scale, with the scale read from scale.txt in the model's folder at load.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "labkit/backend.hpp"

// Read once per load: a new scale.txt takes effect at the next (re)load, never mid-flight.
struct ScalerState : labkit::ModelState {
  explicit ScalerState(TRITONBACKEND_Model* model) : labkit::ModelState(model) {
    const std::string path = labkit::model_directory(model) + "/scale.txt";
    std::ifstream file(path);
    if (!file) {
      throw labkit::Error("model '" + name + "' needs the file scale.txt beside its config.pbtxt, and " + path +
                          " does not exist: write a number into it, then load the model again",
                          TRITONSERVER_ERROR_NOT_FOUND);
    }
    std::stringstream text;
    text << file.rdbuf();
    std::string content = text.str();
    content.erase(content.find_last_not_of(" \t\r\n") + 1);  // the usual trailing newline is fine
    std::istringstream number(content);
    if (!(number >> scale) || !(number >> std::ws).eof() || !std::isfinite(scale)) {
      throw labkit::Error("model '" + name + "': " + path + " must hold one number, not '" + content + "'",
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    labkit::log_info("model " + name + ": scale " + std::to_string(scale) + " read from " + path);
  }
  float scale = 1.0f;
};

LABKIT_MODEL_STATE(ScalerState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    const float scale = batch.model_as<ScalerState>().scale;
    labkit::Tensor x = batch.input("IN0");
    for (size_t k = 0; k < x.count<float>(); ++k) x.data<float>()[k] *= scale;
    batch.output("OUT0", x);
  });
}
"""

CONFIG = model_config(MODEL, BACKEND, [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])])


def write_scale(server: TritonServer, scale: float | None) -> None:
    """Write scale.txt into the model's folder (beside config.pbtxt), or remove it with ``None``."""
    if scale is None:
        (server.repository.model_dir(MODEL) / ARTIFACT).unlink(missing_ok=True)
        server.repository.mark_changed(MODEL)
    else:
        server.repository.write_file(MODEL, ARTIFACT, f"{scale}\n", version=None)


def setup(server: TritonServer, scale: float | None = 2.5, source: str = SOURCE) -> None:
    """Write the config and scale.txt (``None``: no file), build the backend and load the model.
    Without the file the load raises ModelLoadError naming the missing path."""
    server.repository.write_config(CONFIG)
    write_scale(server, scale)
    server.cpp_backend(BACKEND, source, [MODEL])


@dataclass
class ScaledResult:
    scale: float
    sent: np.ndarray
    received: np.ndarray

    @property
    def ok(self) -> bool:
        return bool(np.allclose(self.received, self.sent * self.scale))

    def __repr__(self) -> str:
        return (
            f"{MODEL}: {self.sent.tolist()} x {self.scale} = {self.received.tolist()} ({'ok' if self.ok else 'WRONG'})"
        )


def scaled(server: TritonServer, values: list[float] | None = None) -> ScaledResult:
    """Send one request; check the answer against the scale.txt on disk."""
    sent = np.asarray(values if values is not None else [1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    scale = float((server.repository.model_dir(MODEL) / ARTIFACT).read_text())
    return ScaledResult(scale, sent, infer(server, MODEL, {"IN0": sent}, ["OUT0"])["OUT0"])


def run(server: TritonServer) -> Outcome:
    """Without scale.txt the load fails naming the file; with it, the answer is scaled by it."""
    try:
        setup(server, scale=None)
        missing_error = False
    except ModelLoadError as exc:
        missing_error = ARTIFACT in exc.reason  # the message must tell the user which file to write
    setup(server, scale=2.5)
    result = scaled(server)
    return Outcome(result.ok and missing_error, {"scale": result.scale, "missing_file_error": missing_error})
