"""Exercises of notebook 04 (C++ and Python, measured): the Python work done once per batch, and the
C++ work with its step count from the config."""

from __future__ import annotations

import ast

import numpy as np

from ..inference import infer, infer_together
from ..server.base import TritonServer
from ..stats import model_stats
from .core import NotYet, exercise, reload_with

VECTOR_MODEL = "python_work_batched"
STEPS_MODELS = ("cpp_steps_a", "cpp_steps_b")


def recurrence(x: np.ndarray, steps: int) -> np.ndarray:
    """What both `work` backends compute: ``steps`` rounds of y = 0.999 y + 0.001 x, from y = 0."""
    y = np.zeros_like(x, dtype=np.float32)
    for _ in range(steps):
        y = y * np.float32(0.999) + x * np.float32(0.001)
    return y


def _loops_in_loops(source: str) -> list[int]:
    """Lines of execute() where a loop runs inside another loop (the recurrence per request)."""
    tree = ast.parse(source)
    execute = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "execute"), None)
    loops = (ast.For, ast.While)
    lines = set()
    for outer in (n for n in ast.walk(execute) if isinstance(n, loops)) if execute else ():
        for inner in ast.walk(outer):
            if inner is not outer and isinstance(inner, loops):
                lines.add(inner.lineno)
    return sorted(lines)


@exercise("04-vectorize", "04_cpp_vs_python", "the Python work once per batch, not once per request",
          "np.concatenate the requests' inputs, run the 300 steps once on the whole array, then np.split the result "
          "at the requests' row counts.")
def vectorize(server: TritonServer) -> None:
    path = server.repository.model_dir(VECTOR_MODEL) / "1" / "model.py"
    if not path.exists():
        raise NotYet(f"model {VECTOR_MODEL!r} has no model.py yet.", f"run the `%%triton_python {VECTOR_MODEL}` cell first.")
    rng = np.random.default_rng(4)
    sent = [rng.standard_normal((rows, 2, 128)).astype(np.float32) for rows in (1, 2, 1, 3)]
    for _ in range(3):  # four requests released together nearly always share an execution; try again if not
        before = model_stats(server, VECTOR_MODEL, settle=True)
        answers = infer_together(server, VECTOR_MODEL, [{"INPUTTensor": x} for x in sent])
        for i, (x, out) in enumerate(zip(sent, answers)):
            got = out["OUTPUTTensor"]
            if got.shape != x.shape or not np.allclose(got, recurrence(x, 300), rtol=1e-4, atol=1e-6):
                raise NotYet(f"request {i} ({x.shape[0]} row(s)) did not get the 300-step recurrence of its own "
                             f"input back (shape {list(got.shape)}).", "each response holds only its request's rows, in order.")
        if model_stats(server, VECTOR_MODEL, settle=True).since(before).execution_count < len(sent):
            break
    else:
        raise NotYet("the answers are right, but Triton never batched the four requests, so the check could not "
                     "see a whole batch.", "keep the config the notebook wrote (dynamic batching).")
    nested = _loops_in_loops(path.read_text())
    if nested:
        raise NotYet(f"the answers are right, but the steps still run inside the loop over requests "
                     f"(model.py line {', '.join(map(str, nested))}): once per request, not once per batch.")


@exercise("04-steps", "04_cpp_vs_python", "the C++ work with its step count from the config",
          "read the parameter \"steps\" once per model load, into a state derived from labkit::ModelState "
          "(std::stoi(parameter(\"steps\", \"300\"))), and loop that many times.")
def steps(server: TritonServer) -> None:
    x = np.random.default_rng(5).standard_normal((1, 2, 128)).astype(np.float32)
    for model, count in zip(STEPS_MODELS, (17, 1000)):
        reload_with(server, model, steps=count)
        got = infer(server, model, {"INPUTTensor": x})["OUTPUTTensor"]
        if not np.allclose(got, recurrence(x, count), rtol=1e-3, atol=1e-6):
            ran = next((s for s in (300, 0, 1) if np.allclose(got, recurrence(x, s), rtol=1e-3, atol=1e-6)), None)
            guess = f" (that is {ran} steps)" if ran is not None else ""
            raise NotYet(f"{model} with parameter steps {count} did not compute {count} steps of the recurrence{guess}.")
