"""Exercises of notebook 01 (a Python backend): a third output, and a whole batch at once."""

from __future__ import annotations

import ast

import numpy as np

from ..inference import infer, infer_together
from ..server.base import TritonServer
from ..stats import model_stats
from .core import NotYet, exercise

OUTPUT2_MODEL = "add_sub3"
BATCH_MODEL = "add_sub_vec"


def _model_source(server: TritonServer, model: str) -> str:
    path = server.repository.model_dir(model) / "1" / "model.py"
    if not path.exists():
        raise NotYet(f"model {model!r} has no model.py yet.", f"run the `%%triton_python {model}` cell first.")
    return path.read_text()


@exercise("01-output2", "01_python_backend", "add OUTPUT2 = INPUT0 × INPUT1 to add_sub",
          "each response lists its output tensors: add a third one named OUTPUT2 holding the element-wise product.",
          sources=(OUTPUT2_MODEL,))
def output2(server: TritonServer) -> None:
    rng = np.random.default_rng(2023)
    a = rng.integers(-9, 10, 4).astype(np.float32) / 2
    b = rng.integers(-9, 10, 4).astype(np.float32) / 4
    shown = f"INPUT0={a.tolist()}, INPUT1={b.tolist()}"
    out = infer(server, OUTPUT2_MODEL, {"INPUT0": a, "INPUT1": b})
    if "OUTPUT2" not in out:
        raise NotYet(f"the answer has no OUTPUT2 (for {shown}); it has {', '.join(sorted(out))}.")
    got = out["OUTPUT2"]
    if got.dtype != np.float32:
        raise NotYet(f"OUTPUT2 is {got.dtype}; the config says FP32.", "keep the result float32 (a * b of two float32 arrays is).")
    if np.allclose(got, a + b) and not np.allclose(a + b, a * b):
        raise NotYet(f"OUTPUT2 was {got.tolist()} for {shown}: that is INPUT0 + INPUT1.", "multiply: a * b, not a + b.")
    if not np.allclose(got, a * b):
        raise NotYet(f"OUTPUT2 was {got.tolist()} for {shown}; expected their product {(a * b).tolist()}.")
    if not (np.allclose(out["OUTPUT0"], a + b) and np.allclose(out["OUTPUT1"], a - b)):
        raise NotYet("OUTPUT2 is right, but OUTPUT0/OUTPUT1 are no longer the sum and difference.",
                      "keep the two outputs add_sub already had.")


def _loop_lines(source: str) -> list[int]:
    """Lines inside execute() where + or - is computed within a loop (for, while or a comprehension)."""
    tree = ast.parse(source)
    execute = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.name == "execute"), None)
    if execute is None:
        return []
    loops = (ast.For, ast.While, ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)
    lines = []
    for loop in (n for n in ast.walk(execute) if isinstance(n, loops)):
        for node in ast.walk(loop):
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
                lines.append(node.lineno)
    return sorted(set(lines))


@exercise("01-batch", "01_python_backend", "handle a whole batch at once with numpy",
          "np.concatenate the requests' INPUT0 (and INPUT1) along axis 0, compute the sum and difference once, "
          "then np.split the results at the requests' row counts (np.cumsum of them, without the last).",
          sources=(BATCH_MODEL,))
def whole_batch(server: TritonServer) -> None:
    source = _model_source(server, BATCH_MODEL)
    rows = [1, 3, 2, 1, 2, 3, 1, 2]  # requests of different sizes, sent together: Triton batches them
    rng = np.random.default_rng(7)
    sent = [(rng.integers(-50, 50, (n, 4)).astype(np.float32), rng.integers(-50, 50, (n, 4)).astype(np.float32))
            for n in rows]
    before = model_stats(server, BATCH_MODEL, settle=True)
    answers = infer_together(server, BATCH_MODEL, [{"INPUT0": a, "INPUT1": b} for a, b in sent])
    for i, (a, b) in enumerate(sent):
        out = answers[i]
        if out["OUTPUT0"].shape != a.shape or not np.allclose(out["OUTPUT0"], a + b) or not np.allclose(out["OUTPUT1"], a - b):
            raise NotYet(f"request {i} ({a.shape[0]} row(s)) got OUTPUT0 of shape {list(out['OUTPUT0'].shape)} "
                         f"that is not its own sum: each response must hold only its request's rows, in order.")
    executed = model_stats(server, BATCH_MODEL, settle=True).since(before)
    if executed.execution_count >= len(rows):
        raise NotYet("the answers are right, but Triton never put two requests in one execute() here, so the "
                     "check could not see a whole batch.", "keep the config's dynamic_batching as the notebook wrote it.")
    inside = _loop_lines(source)
    if inside:
        raise NotYet(f"the answers are right, but execute() still computes + or - inside a loop (model.py line "
                     f"{', '.join(map(str, inside))}).")
