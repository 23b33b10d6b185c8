"""Lesson: an ensemble, a Python pre-process feeding a C++ model inside Triton.

``pipeline`` takes RAW (INT32 [4], e.g. pixel values 0-255). Step 0, ``preprocess`` (Python), scales it
to SCALED = RAW / 255 (FP32); Triton hands that tensor, named ``scaled`` inside the ensemble, to step 1,
``square`` (C++, labkit's helper layer), whose OUT0 = IN0² becomes the ensemble's RESULT. The client
sends one request and gets one answer; the timeline shows both steps of every request, and the
ensemble's statistics carry each step model's.

    lab = labkit.start()
    ensemble.setup(lab)
    print(ensemble.call(lab))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...errors import EnsembleStepError, LessonOutcomeError
from ...observe.ensembles import EnsembleTimeline, ensemble_timeline, serve_ensemble
from ...repository import model_config
from ...repository.ensemble_config import Step, ensemble_config
from ...server.base import TritonServer
from ...traffic.generator import run_load
from .outcome import Outcome

MODEL = "pipeline"
STEPS = ("preprocess", "square")

PRE_SOURCE = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            scaled = (raw / 255.0).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCALED", scaled)]))
        return responses
"""

SQUARE_SOURCE = """#include "labkit/backend.hpp"

LABKIT_MODEL_STATE(labkit::ModelState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor t = batch.input("IN0");
    float* v = t.data<float>();
    for (size_t i = 0; i < t.count<float>(); ++i) v[i] = v[i] * v[i];
    batch.output("OUT0", t);
  });
}
"""

PRE_CONFIG = model_config("preprocess", "python", [("RAW", "INT32", [4])], [("SCALED", "FP32", [4])])
SQUARE_CONFIG = model_config("square", "square", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])])
CONFIG = ensemble_config(
    MODEL,
    [("RAW", "INT32", [4])],
    [("RESULT", "FP32", [4])],
    [
        Step("preprocess", inputs={"RAW": "RAW"}, outputs={"SCALED": "scaled"}),
        Step("square", inputs={"IN0": "scaled"}, outputs={"OUT0": "RESULT"}),
    ],
)
RAW = np.array([0, 51, 102, 255], dtype=np.int32)


def setup(server: TritonServer) -> list[str]:
    """Write and load both step models, then the ensemble; returns the models serving it."""
    server.python_model("preprocess", PRE_SOURCE, PRE_CONFIG)
    server.repository.write_config(SQUARE_CONFIG)
    server.cpp_backend("square", SQUARE_SOURCE)
    return serve_ensemble(server, CONFIG)


@dataclass
class PipelineResult:
    raw: np.ndarray
    result: np.ndarray

    @property
    def ok(self) -> bool:
        return np.allclose(self.result, (self.raw / 255.0) ** 2, rtol=1e-5)

    def __repr__(self) -> str:
        return f"pipeline: {'ok' if self.ok else 'WRONG'}\n  RAW    = {self.raw.tolist()}\n  RESULT = {self.result.round(4).tolist()}"


def call(server: TritonServer, raw: np.ndarray = RAW, protocol: str = "http") -> PipelineResult:
    """One request to the ensemble; its RESULT should be (RAW / 255)²."""
    return PipelineResult(raw, infer(server, MODEL, {"RAW": raw}, ["RESULT"], protocol=protocol)["RESULT"])


def record(server: TritonServer, requests: int = 12, concurrency: int = 2) -> EnsembleTimeline:
    """A timeline of ``requests`` requests from ``concurrency`` clients."""
    with ensemble_timeline(server, MODEL) as timeline:
        run_load(server, MODEL, {"RAW": RAW}, requests=requests, concurrency=concurrency)
    return timeline


def missing_step_error(server: TritonServer, missing: str = "postprocess") -> EnsembleStepError:
    """The error for a third step naming a model that is not in the repository (nothing is written)."""
    steps = [Step(s.model_name, dict(s.input_map), dict(s.output_map)) for s in CONFIG.ensemble_scheduling.step]
    steps[-1] = Step("square", {"IN0": "scaled"}, {"OUT0": "squared"})
    steps.append(Step(missing, {"IN0": "squared"}, {"OUT0": "RESULT"}))
    broken = ensemble_config("pipeline_v2", [("RAW", "INT32", [4])], [("RESULT", "FP32", [4])], steps)
    try:
        serve_ensemble(server, broken)
    except EnsembleStepError as exc:
        return exc
    raise LessonOutcomeError(
        model="pipeline_v2",
        happened="was served",
        expected=f"its step {missing!r} is not in the repository",
        check="give missing= a name that no model of the repository has",
    )


def run(server: TritonServer) -> Outcome:
    """The answer is right, every request ran both steps (the traces agree with the statistics), and a
    step naming a missing model is refused before loading."""
    setup(server)
    result = call(server)
    timeline = record(server, requests=6)
    error = missing_step_error(server)
    counts = timeline.counts()
    ok = (
        result.ok
        and timeline.agrees_with_statistics()
        and counts["every_request_ran_every_step"]
        and error.step == 2
        and error.refused_by == "labkit"
    )
    return Outcome(
        ok, {"answer_ok": result.ok, **timeline.summary(), "missing_step": error.step_model}, timeline.figure()
    )
