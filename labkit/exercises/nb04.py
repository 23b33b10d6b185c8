"""Exercises of notebook 04 (C++ and Python, measured): the Python work done once per batch, and the
C++ work with its step count from the config.

Both checks run the person's latest code in models of their own (labkit.exercises.scratch): the
notebook's models and configs stay as they were.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

from ..errors import InferenceError, ModelLoadError
from ..inference import infer, infer_together
from ..server.base import TritonServer
from .core import NotYet, exercise
from .scratch import config_of, latest, library_files, scratch_model

VECTOR_MODEL = "python_work_batched"
STEPS_MODELS = ("cpp_steps_a", "cpp_steps_b")
STEPS_BACKEND = "worksteps"
#: Lines of model.py one more request in an execute may add (its input, its response): the 300 steps
#: are 600 lines per run, so work done once per request shows as hundreds.
LINES_PER_REQUEST = 20
#: Rows of the requests the check sends together (1 + 2 + 1 + 3), and of the one it sends alone: its
#: model's preferred batch size, so either executes as soon as those rows are queued.
ROWS = (1, 2, 1, 3)
#: The batching delay of the check's model, a fallback only: the preferred size ends the wait first.
QUEUE_DELAY_US = 5_000_000


def recurrence(x: np.ndarray, steps: int) -> np.ndarray:
    """What both `work` backends compute: ``steps`` rounds of y = 0.999 y + 0.001 x, from y = 0."""
    y = np.zeros_like(x, dtype=np.float32)
    for _ in range(steps):
        y = y * np.float32(0.999) + x * np.float32(0.001)
    return y


def _same(got: np.ndarray, x: np.ndarray, steps: int) -> bool:
    return got.dtype == np.float32 and got.shape == x.shape and np.allclose(got, recurrence(x, steps), rtol=1e-3, atol=1e-6)


@exercise("04-vectorize", "04_cpp_vs_python", "the Python work once per batch, not once per request",
          "np.concatenate the requests' inputs, run the 300 steps once on the whole array, then np.split the result "
          "at the requests' row counts.",
          sources=(VECTOR_MODEL,))
def vectorize(server: TritonServer) -> None:
    source = server.repository.model_dir(VECTOR_MODEL) / "1" / "model.py"
    if not source.exists():
        raise NotYet(f"model {VECTOR_MODEL!r} has no model.py yet.", f"run the `%%triton_python {VECTOR_MODEL}` cell first.",
                     rule="setup")
    config = config_of(server, VECTOR_MODEL, "the cell that writes its config")
    # One instance, batches of exactly sum(ROWS) rows: the four requests sent together share one execute,
    # and one request of as many rows runs alone; the same work, in one request or in four.
    del config.instance_group[1:]
    for group in config.instance_group:
        group.count = 1
    config.dynamic_batching.max_queue_delay_microseconds = QUEUE_DELAY_US
    config.dynamic_batching.preferred_batch_size[:] = [sum(ROWS)]
    wrapper = resources.files(__package__).joinpath("cells", "04-vectorize.wrapper").read_text()
    files = {"1/model.py": wrapper, "1/participant.py": source.read_text()}
    rng = np.random.default_rng(4)
    sent = [rng.standard_normal((rows, 2, 128)).astype(np.float32) for rows in ROWS]
    whole = np.concatenate(sent)
    with scratch_model(server, "vectorize", config, files) as model:
        try:
            server.load(model)
        except ModelLoadError as exc:
            raise NotYet(f"model.py of {VECTOR_MODEL} does not load: {exc.reason}", rule="load") from None
        try:
            answers = [infer(server, model, {"INPUTTensor": whole})] + infer_together(
                server, model, [{"INPUTTensor": x} for x in sent])
        except InferenceError as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise NotYet(f"requests of {', '.join(map(str, ROWS))} rows sent together, or one of {len(whole)} rows, "
                         f"failed: {first}", rule="failed") from None
        for x, out in zip([whole, *sent], answers):
            got = out["OUTPUTTensor"]
            if not _same(got, x, 300):
                raise NotYet(f"a request of {x.shape[0]} row(s) did not get the 300-step recurrence of its own input "
                             f"back (shape {list(got.shape)}, {got.dtype}).",
                             "each response holds only its request's rows, in order.", rule="values")
        reports = [json.loads(line) for line in (server.repository.model_dir(model) / "report.jsonl").read_text().splitlines()]
    alone = min(reports, key=lambda r: r["requests"])
    together = max(reports, key=lambda r: r["requests"])
    if together["requests"] < 2 or alone["requests"] != 1:
        raise NotYet(f"Triton did not execute the requests as the check arranged (requests per execute: "
                     f"{[r['requests'] for r in reports]}).", "run the check again.", rule="no-batch")
    growth = (together["lines"] - alone["lines"]) / (together["requests"] - 1)
    if growth > LINES_PER_REQUEST:
        raise NotYet(f"the answers are right, but execute() ran {alone['lines']} lines of model.py for one request of "
                     f"{len(whole)} rows and {together['lines']} for {together['requests']} requests of as many rows in all: "
                     f"about {growth:.0f} more per request, so "
                     f"the steps still run once per request, not once per batch.", rule="per-request")


def _load_with_steps(server: TritonServer, model: str, steps: int | None) -> None:
    """Reload ``model`` with a new model state and parameter steps (none at all for None)."""
    config = server.repository.read_config(model)
    if steps is None:
        if "steps" in config.parameters:
            del config.parameters["steps"]
    else:
        config.parameters["steps"].string_value = str(steps)
    server.repository.write_config(config)
    server.repository.mark_changed(model)
    try:
        server.load(model)
    except ModelLoadError as exc:
        given = "no parameter steps" if steps is None else f"parameter steps {steps}"
        raise NotYet(f"a model of worksteps with {given} did not load: {exc.reason}",
                     "with no parameter steps, use 300 (parameter(\"steps\", \"300\")).", rule="load") from None


@exercise("04-steps", "04_cpp_vs_python", "the C++ work with its step count from the config",
          "read the parameter \"steps\" once per model load, into a state derived from labkit::ModelState "
          "(std::stoi(parameter(\"steps\", \"300\"))), and loop that many times.",
          sources=(STEPS_BACKEND,))
def steps(server: TritonServer) -> None:
    build = latest(server, STEPS_BACKEND)
    config = config_of(server, STEPS_MODELS[0], "the cell that configures cpp_steps_a and cpp_steps_b")
    x = np.random.default_rng(5).standard_normal((1, 2, 128)).astype(np.float32)
    # Two models of one library, then each loaded again with other steps: the count belongs to each load.
    with scratch_model(server, f"steps_a_{build.digest}", config, library_files(build)) as first, \
            scratch_model(server, f"steps_b_{build.digest}", config, library_files(build)) as second:
        for model, count in ((first, 17), (second, 1000), (first, 3), (second, None)):
            _load_with_steps(server, model, count)
            got = infer(server, model, {"INPUTTensor": x})["OUTPUTTensor"]
            expected = 300 if count is None else count
            if not _same(got, x, expected):
                ran = next((s for s in (300, 17, 1000, 3, 0, 1, expected + 1, expected - 1)
                            if _same(got, x, s)), None)
                guess = f" (it computed {ran})" if ran is not None else ""
                given = "no parameter steps" if count is None else f"parameter steps {count}"
                raise NotYet(f"a model of worksteps loaded with {given} did not compute {expected} steps of the "
                             f"recurrence{guess}.", rule="steps")
