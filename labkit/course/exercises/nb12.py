"""Exercises of notebook 12 (BLS in depth): a BLS model that loads the model it needs on demand, and one
that reads every response of a decoupled model.

Both checks judge the person's model with inputs of their own; the first one unloads both callees first
and puts the server's loaded models back as it found them, however it ends.
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs

PICKER = "pick_scale"
#: FACTOR -> the model pick_scale must ask; both are in the repository, neither is loaded at first.
SCALERS = {2: "scale_x2", 3: "scale_x3"}
SCALER_SOURCE = '''"""scale_x{factor}: Y = {factor} * X."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", {factor} * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
            for r in requests
        ]
'''

STATS = "repeat_stats"
CALLEE = "repeat_py"


def _ready(server: TritonServer) -> dict[str, bool]:
    return {name: server.models.is_model_ready(name) for name in SCALERS.values()}


def _restore(server: TritonServer, before: dict[str, bool]) -> None:
    for name, was_ready in before.items():
        if server.models.is_model_ready(name) == was_ready:
            continue
        if was_ready:
            server.load(name)
        else:
            server.unload(name)


@exercise("12-load-on-demand", sources=(PICKER,))
def load_on_demand(server: TritonServer) -> None:
    before = _ready(server)
    try:
        for name, was_ready in before.items():
            if was_ready:
                server.unload(name)
        x = np.array([1.5, -2.0, 4.0, 0.25], np.float32)
        for factor in (3, 2, 2, 3):
            needed, other = SCALERS[factor], SCALERS[5 - factor]
            shown = f" (FACTOR={factor}, X={x.tolist()})"
            try:
                out = infer(server, PICKER, {"X": x, "FACTOR": np.array([factor], np.int32)}, timeout_s=30)
            except InferenceError as exc:
                raise NotYet(f"the request{shown} failed: {str(exc).strip().splitlines()[0]}", rule="error") from None
            require_configured_outputs(server, PICKER, out, shown=shown)
            if not np.allclose(out["Y"], factor * x):
                raise NotYet(f"Y was {out['Y'].tolist()}{shown}; expected {(factor * x).tolist()}.", rule="values")
            ready = _ready(server)
            if not ready[needed]:
                raise NotYet(
                    f"after the request{shown} {needed} was no longer loaded; leave the model a request needed "
                    f"serving, so that the next request like it does not load it again.",
                    rule="not-kept",
                )
            if ready[other]:
                raise NotYet(
                    f"after the request{shown} both {needed} and {other} were loaded; at most one of them may "
                    f"serve at a time.",
                    rule="both-loaded",
                )
    finally:
        _restore(server, before)


@exercise("12-bls-decoupled", sources=(STATS,))
def bls_decoupled(server: TritonServer) -> None:
    for values in ([4, 8, 15], [], [7], [-5, 5, 100, 1, 2]):
        shown = f" (IN={values})"
        try:
            out = infer(server, STATS, {"IN": np.array(values, np.int32)}, timeout_s=30)
        except InferenceError as exc:
            raise NotYet(f"the request{shown} failed: {str(exc).strip().splitlines()[0]}", rule="error") from None
        require_configured_outputs(server, STATS, out, shown=shown)
        count, total = int(out["COUNT"][0]), int(out["TOTAL"][0])
        if count != len(values):
            raise NotYet(
                f"COUNT was {count}{shown}; {CALLEE} sent {len(values)} responses with an OUT.",
                "count only the responses that carry outputs: the final flag can come in a response of its own.",
                rule="count",
            )
        if total != sum(values):
            raise NotYet(f"TOTAL was {total}{shown}; the OUT values add up to {sum(values)}.", rule="total")
