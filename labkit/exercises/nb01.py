"""Exercises of notebook 01 (a Python backend): a third output, and a whole batch at once.

01-batch is judged by what the model does, not by how its text looks: the check serves the person's
model.py inside a model of its own (stub_side/batch_work.py) whose inputs count the additions and
subtractions computed from them, sends one request alone and then eight that Triton batches into one
execute(), and compares: work that grows with the number of requests is a loop over them.
"""

from __future__ import annotations

import numpy as np

from ..inference import infer, infer_together
from ..server.base import TritonServer
from . import stub_side
from .core import NotYet, exercise, require_configured_outputs
from .scratch import owned_model

OUTPUT2_MODEL = "add_sub3"
BATCH_MODEL = "add_sub_vec"
WORK_MODEL = "add_sub_vec_work_check"
BATCH_ROWS = [1, 3, 2, 1, 2, 3, 1, 2]  # requests of different sizes, sent together: one execute() for all


@exercise("01-output2", "01_python_backend", "add OUTPUT2 = INPUT0 × INPUT1 to add_sub",
          "each response lists its output tensors: add a third one named OUTPUT2 holding the element-wise product.",
          sources=(OUTPUT2_MODEL,))
def output2(server: TritonServer) -> None:
    rng = np.random.default_rng(2023)
    a = rng.integers(-9, 10, 4).astype(np.float32) / 2
    b = rng.integers(-9, 10, 4).astype(np.float32) / 4
    shown = f" (for INPUT0={a.tolist()}, INPUT1={b.tolist()})"
    out = infer(server, OUTPUT2_MODEL, {"INPUT0": a, "INPUT1": b})
    if "OUTPUT2" not in out:
        raise NotYet(f"the answer has no OUTPUT2{shown}; it has {', '.join(sorted(out))}.")
    require_configured_outputs(server, OUTPUT2_MODEL, out, shown=shown)
    got = out["OUTPUT2"]
    if np.allclose(got, a + b) and not np.allclose(a + b, a * b):
        raise NotYet(f"OUTPUT2 was {got.tolist()}{shown}: that is INPUT0 + INPUT1.", "multiply: a * b, not a + b.")
    if not np.allclose(got, a * b):
        raise NotYet(f"OUTPUT2 was {got.tolist()}{shown}; expected their product {(a * b).tolist()}.")
    if not (np.allclose(out["OUTPUT0"], a + b) and np.allclose(out["OUTPUT1"], a - b)):
        raise NotYet("OUTPUT2 is right, but OUTPUT0/OUTPUT1 are no longer the sum and difference.",
                     "keep the two outputs add_sub already had.")


def _serve_work_model(server: TritonServer) -> None:
    """WORK_MODEL: the person's latest model.py inside batch_work.py, batching all of BATCH_ROWS at once."""
    source = server.repository.model_dir(BATCH_MODEL) / "1" / "model.py"
    if not source.exists():
        raise NotYet(f"model {BATCH_MODEL!r} has no model.py yet.", f"run the `%%triton_python {BATCH_MODEL}` cell first.")
    config = server.repository.read_config(BATCH_MODEL)
    config.name = WORK_MODEL
    config.max_batch_size = sum(BATCH_ROWS)  # a full batch executes at once: no waiting on the delay
    config.dynamic_batching.max_queue_delay_microseconds = 5_000_000  # time enough for all eight to arrive
    del config.dynamic_batching.preferred_batch_size[:]
    del config.instance_group[1:]
    config.instance_group[0].count = 1
    config.output.add(name="WORK", data_type="TYPE_INT64", dims=[3])
    server.repository.write_config(config)
    server.repository.write_file(WORK_MODEL, "person.py", source.read_text())
    server.repository.write_file(WORK_MODEL, "model.py", stub_side.source("batch_work"))
    server.load(WORK_MODEL)


def _answers(server: TritonServer, sent: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[int, int, int]]:
    """Send ``sent`` together; check each answer is its own request's sum and difference; return the
    WORK each response reported: (requests in its execute(), additions, subtractions)."""
    answers = infer_together(server, WORK_MODEL, [{"INPUT0": a, "INPUT1": b} for a, b in sent])
    for i, ((a, b), out) in enumerate(zip(sent, answers)):
        shown = f" (request {i} of {len(sent)}, {a.shape[0]} row(s))"
        require_configured_outputs(server, WORK_MODEL, out, rows=a.shape[0], shown=shown)
        if not (np.allclose(out["OUTPUT0"], a + b) and np.allclose(out["OUTPUT1"], a - b)):
            raise NotYet(f"OUTPUT0/OUTPUT1 are not the request's own sum and difference{shown}: each response "
                         f"must hold only its request's rows, in order.")
    return [tuple(int(v) for v in out["WORK"][0]) for out in answers]


@exercise("01-batch", "01_python_backend", "handle a whole batch at once with numpy",
          "np.concatenate the requests' INPUT0 (and INPUT1) along axis 0, compute the sum and difference once, "
          "then np.split the results at the requests' row counts (np.cumsum of them, without the last).",
          sources=(BATCH_MODEL,))
def whole_batch(server: TritonServer) -> None:
    rng = np.random.default_rng(7)

    def rows(n: int) -> tuple[np.ndarray, np.ndarray]:
        return rng.integers(-50, 50, (n, 4)).astype(np.float32), rng.integers(-50, 50, (n, 4)).astype(np.float32)

    with owned_model(server, WORK_MODEL):
        _serve_work_model(server)
        [alone] = _answers(server, [rows(sum(BATCH_ROWS))])
        together = _answers(server, [rows(n) for n in BATCH_ROWS])
    batched = [w for w in together if w[0] > 1]
    if not batched:
        raise NotYet("the answers are right, but Triton never put two requests in one execute() here, so the "
                     "check could not see a whole batch.", "keep max_batch_size and dynamic_batching in the config.")
    requests, adds, subtracts = max(batched)
    _, adds_alone, subtracts_alone = alone
    if adds > adds_alone or subtracts > subtracts_alone:
        raise NotYet(f"the answers are right, but execute() computed {adds} additions and {subtracts} subtractions "
                     f"for {requests} requests, and {adds_alone} and {subtracts_alone} for one request with as many "
                     f"rows: the work still runs once per request.")
