"""The exercises as data, at the bottom of the course: each one's id, notebook, title and hint, its starter
and reference solution (files in ``exercises/cells/``), the tag that marks its cell, and the Verdict a check
answers with. It imports no other labkit module, so that the room (the board, the wire format between
board and grader) reads the exercises without loading their checks, the server or the clients.

The checks (``labkit.course.exercises``, one module per notebook) register against these ids.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

#: The notebook tag that marks a "your turn" cell: ``exercise:<id>``.
TAG_PREFIX = "exercise:"
OUTPUT_METADATA = "labkit.verdict"  # the key of a check's verdict in its cell output's metadata
NOTEBOOKS = "[0-9][0-9]_*.ipynb"  # the workshop's notebooks, by name
#: What notebook 11's environments install (exercise 11-own-package): the room's images carry these wheels
#: (labkit.room.hub.lab_image), so that a lab and the grader, which has no network, build the environments offline.
ENVIRONMENT_PACKAGES = ("cowsay==6.1",)
#: Where the room's images hold examples/real_models, the real-model lessons' models (labkit.room.hub.lab_models),
#: and where those lessons look for them when labkit is not a checkout (labkit.course.lessons.real_models).
REAL_MODELS_IN_IMAGES = "/opt/labkit/examples/real_models"


@dataclass(frozen=True)
class Verdict:
    exercise: str
    passed: bool = False
    problem: str = ""
    hint: str = ""
    rule: str = ""  # which rule of the check failed ("" when passed or not named)

    def line(self) -> str:
        if self.passed:
            return f"passed: {self.exercise}"
        return f"not yet: {self.exercise}: {self.problem}" + (f" Hint: {self.hint}" if self.hint else "")

    def __repr__(self) -> str:
        return self.line()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, str], dict[str, Any]]:
        """The one line, and the verdict itself in the output's metadata: a grader reads it from the
        kernel's own output (nothing else can write there), not from a file a model could write too."""
        return {"text/plain": self.line()}, {OUTPUT_METADATA: asdict(self)}


@dataclass(frozen=True)
class Exercise:
    """``id`` like "01-output2"; ``notebook`` the notebook's name without .ipynb; ``hint`` is the default hint."""

    id: str
    notebook: str
    title: str
    hint: str

    def starter(self) -> str:
        """The cell as shipped in the notebook."""
        return _cell(self.id, "starter")

    def solution(self) -> str:
        """A reference solution for the cell (kept out of the notebook)."""
        return _cell(self.id, "solution")


def _cell(exercise_id: str, kind: str) -> str:
    return resources.files(__package__).joinpath("exercises", "cells", f"{exercise_id}.{kind}").read_text()


_EXERCISES = (
    Exercise(
        "01-output2",
        "01_python_backend",
        "compare's model.py from nothing: two outputs of their own shape and datatype, for every request of a batch",
        "execute() gets a list of requests and returns a list of responses, one per request and in the same order; each request's inputs hold its own rows, and each response carries one pb_utils.Tensor per output of the config, with the config's datatype and a row per row of the request (python_backend README, r23.12, Default Mode: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#default-mode).",
    ),
    Exercise(
        "01-bad-request",
        "01_python_backend",
        "an error for one bad request, answers for the others",
        "a response can carry an error instead of outputs, and it fails only its own request; see the python_backend README (r23.12), Error Handling: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#error-handling",
    ),
    Exercise(
        "14-scale",
        "14_cpp_parameters_instances",
        "a C++ backend that scales by a parameter of its config",
        "the scale belongs to a model load, not to a request: it is a parameter of the model's config (Triton keeps every config parameter as a string), read once when the model's state is made in TRITONBACKEND_ModelInitialize. Read the backend README (r23.12), Backend Lifecycles, Backend and Model: https://github.com/triton-inference-server/backend/blob/r23.12/README.md#backend-and-model, and the comments on labkit::ModelState in labkit/model.hpp.",
    ),
    Exercise(
        "02-raw-execute",
        "02_cpp_backends",
        "the execute loop without labkit::execute, statistics included",
        "this is the request life cycle that labkit::execute hides: a backend owns each request from TRITONBACKEND_ModelInstanceExecute until it releases it; in between it answers it once, and Triton counts only what the backend reports, per request and per execution. Read the backend README (r23.12), Inference Requests and Responses, Single Response: https://github.com/triton-inference-server/backend/blob/r23.12/README.md#single-response, and the comments on the statistics functions in tritonbackend.h: https://github.com/triton-inference-server/core/blob/r23.12/include/triton/core/tritonbackend.h.",
    ),
    Exercise(
        "03-delay",
        "03_dynamic_batching",
        "a queue delay that batches six clients without making them wait long",
        "too short, and each request goes before the others arrive; too long, and every request waits it out: six clients resend within a millisecond or two of their answers.",
    ),
    Exercise(
        "03-preferred",
        "03_dynamic_batching",
        "batched_add_sub's config.pbtxt from nothing: batches of up to 8, 4 at once, 50 ms for fewer",
        "a config is Triton's ModelConfig in text: inputs and outputs need name, data_type and dims (one row's shape: "
        "max_batch_size adds the batch dimension); a preferred_batch_size is a batch Triton sends as soon as it can form "
        "it, and max_queue_delay_microseconds how long a smaller one waits for company (model configuration, r23.12: "
        "https://github.com/triton-inference-server/server/blob/r23.12/docs/user_guide/model_configuration.md#dynamic-batcher).",
    ),
    Exercise(
        "04-vectorize",
        "04_cpp_vs_python",
        "the Python work once per batch, not once per request",
        "execute() gets every request of a batch at once: the steps can run on all of their rows as one array, as long as each request gets its own rows back, in order (python_backend README, r23.12: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#execute).",
    ),
    Exercise(
        "04-peak",
        "04_cpp_vs_python",
        "C++ work per vector of the batch: each scaled by its own peak",
        "batch.input() holds every request's rows one after another: a vector is a run of 128 values (the config's last dimension), and Triton may put other requests' vectors beside it (backend README, r23.12: https://github.com/triton-inference-server/backend/blob/r23.12/README.md#backends).",
    ),
    Exercise(
        "05-scale-file",
        "05_docker",
        "read scale.txt from the model's folder inside the container",
        "initialize() is told where the model's folder is, as Triton sees it, and the repository is mounted at the same path in the container (python_backend README, r23.12: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#initialize).",
    ),
    Exercise(
        "06-validate",
        "06_python_based_backend",
        "refuse a model whose scale is missing or unusable, saying why",
        "initialize() runs once per model load: whatever it raises fails that load, and Triton reports the message (python_backend README, r23.12: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#error-handling).",
    ),
    Exercise(
        "06-offset",
        "06_python_based_backend",
        "give the shared backend an optional offset parameter",
        "each model's config reaches initialize() as JSON, parameters included; a parameter a config may leave out needs a value to fall back on (model configuration, r23.12: https://github.com/triton-inference-server/server/blob/r23.12/docs/user_guide/model_configuration.md).",
    ),
    Exercise(
        "07-countdown",
        "07_backend_api_tour",
        "a decoupled collatz: as many responses as the sequence has values, the final flag on the last, an error for N < 1",
        "a decoupled model may send any number of responses, decided as it goes; send(response, flags=...) sends data and "
        "the final flag at once, and a response made with error=pb_utils.TritonError(...) ends a request it cannot serve "
        "(python_backend README, r23.12, Decoupled mode: "
        "https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#decoupled-mode).",
    ),
    Exercise(
        "07-bls-loop",
        "07_backend_api_tour",
        "a BLS model that calls add_sub until its answer is big enough",
        "a BLS call is an ordinary request that execute() builds, sends and reads; what to do next is plain Python that may depend on the answer, and every call is counted in the called model's statistics (python_backend README, r23.12, Business Logic Scripting: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#business-logic-scripting).",
    ),
    Exercise(
        "09-fourth-power",
        "09_state_ensembles_metrics",
        "an ensemble that runs one model as two of its steps",
        "each step's input_map and output_map say which ensemble tensor it reads and writes (the key is the step model's tensor); a model may be the model of several steps (ensembles, r23.12: https://github.com/triton-inference-server/server/blob/r23.12/docs/user_guide/architecture.md#ensemble-models).",
    ),
    Exercise(
        "09-running-max",
        "09_state_ensembles_metrics",
        "one running maximum per sequence",
        "the sequence batcher's controls (CORRID, START, READY) arrive as inputs, like INPUT: a sum belongs to one sequence, and a null request (READY 0) to none (stateful models, r23.12: https://github.com/triton-inference-server/server/blob/r23.12/docs/user_guide/architecture.md#stateful-models).",
    ),
    Exercise(
        "11-own-package",
        "11_python_in_production",
        "one execution environment shared by moo and tux, named the same way in both configs",
        "an environment is a path in each model's config, and several models may name the same one; a path under "
        "$$TRITON_MODEL_DIRECTORY must stay inside that model's folder, so a shared one is named by its path on the "
        "machine (python_backend README, r23.12, notes 3 and 4 under Creating Custom Execution Environments: "
        "https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#creating-custom-execution-environments).",
    ),
    Exercise(
        "12-load-on-demand",
        "12_bls_and_requests",
        "a BLS model that loads the model it needs, and unloads the other",
        "the Python backend can control models from execute: ask whether one is ready, load it, unload it. Read 'Model Loading API' in python_backend's README (r23.12): https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#model-loading-api",
    ),
    Exercise(
        "12-bls-decoupled",
        "12_bls_and_requests",
        "BLS over a decoupled model: count and add up every response",
        "a decoupled model may answer one BLS request with any number of responses, and a plain call expects exactly one. Read 'Using BLS with Decoupled Models' in python_backend's README (r23.12): https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#using-bls-with-decoupled-models, and mind the last response, which can carry no outputs.",
    ),
    Exercise(
        "15-countdown-cpp",
        "15_cpp_decoupled_state",
        "a C++ countdown on a thread per request: one instance streams several requests at once",
        "a decoupled backend may answer after execute has returned: the request and its response factory go to a "
        "thread, which sends, ends the stream, deletes the factory and releases the request; execute returns at once, "
        "and the instance's state counts the threads so that TRITONBACKEND_ModelInstanceFinalize can wait for them "
        "(backend README, r23.12, Decoupled Responses: "
        "https://github.com/triton-inference-server/backend/blob/r23.12/README.md#decoupled-responses).",
    ),
    Exercise(
        "15-cancel-stream",
        "15_cpp_decoupled_state",
        "a batch of Python streams: the one its client cancels stops, the others go on",
        "Triton marks a cancelled request and leaves it to the model: with a batch, each request is asked on its own "
        "(request.is_cancelled()), and only that one's stream is closed with its final flag (python_backend README, "
        "r23.12, Request Cancellation Handling: "
        "https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#request-cancellation-handling).",
    ),
    Exercise(
        "17-one-request",
        "17_real_models",
        "ocr_read sends an image's crops to ocr_rec in as few requests as its batch allows",
        "a BLS request may carry a batch: stack the crops along the first axis (np.stack), at most ocr_rec's max_batch_size (8) a request, and read the answer's TEXT row by row, in the order the crops went in (python_backend README, r23.12, Business Logic Scripting: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#business-logic-scripting).",
    ),
    Exercise(
        "18-threshold",
        "18_real_models_voice",
        "vad_events with a threshold of the client's own, a parameter of each request",
        "a request's parameters come as a JSON string from request.parameters() (python_backend README, r23.12: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#inference-request-parameters); a client sends the threshold as a string, so read it with float(), and keep the config's threshold when a request has none.",
    ),
)
#: Every exercise by id, in the notebooks' order of registration.
REGISTRY: dict[str, Exercise] = {e.id: e for e in _EXERCISES}


def exercises_of(notebook: str) -> list[str]:
    """The exercise ids of a notebook, by its file name or stem."""
    stem = Path(notebook).stem
    return sorted(e for e, x in REGISTRY.items() if x.notebook == stem)


def hint_of(exercise: str) -> str:
    """The exercise's default hint ("" for an id the catalogue does not know)."""
    return REGISTRY[exercise].hint if exercise in REGISTRY else ""


def is_started(exercise: str, source: str) -> bool:
    """Whether a cell differs from the starter the notebook shipped with (an unknown exercise: started)."""
    known = REGISTRY.get(exercise)
    return known is None or source.strip() != known.starter().strip()
