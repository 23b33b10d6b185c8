"""Lesson: Business Logic Scripting, a Python model that calls other models inside Triton.

``bls_demo`` takes add_sub's inputs, asks add_sub (Python) for the sum and difference with a
blocking ``exec()``, and asks minimal_nonbatching (C++) to echo INPUT0 as INT32 with an awaited
``async_exec()``. The calls go through Triton's core, so each callee's statistics count them. When
a callee is not loaded, the caller answers with an error naming it instead of failing obscurely.

    lab = labkit.start()
    bls.setup(lab)
    print(bls.call(lab))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError, LessonOutcomeError
from ...observe.stats import model_stats
from ...repository import model_config
from ...server.base import TritonServer
from .. import reference
from .outcome import Outcome

MODEL = "bls_demo"
CALLEES = ("add_sub", "minimal_nonbatching")

SOURCE = '''"""bls_demo: sum and difference from add_sub (exec), an INT32 echo from minimal_nonbatching (async_exec)."""
import numpy as np
import triton_python_backend_utils as pb_utils

ADD_SUB = "add_sub"
ECHO = "minimal_nonbatching"


class CallFailed(Exception):
    pass


def outputs_of(response, model):
    # A failed call comes back as a response carrying an error, not as an exception.
    if response.has_error():
        raise CallFailed(
            f"BLS call from bls_demo to model '{model}' failed: {response.error().message()} "
            f"Load '{model}' on this server, then send the request again."
        )
    return {t.name(): t for t in response.output_tensors()}


class TritonPythonModel:
    # async: lets execute await async_exec(); a plain exec() inside it simply blocks.
    async def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            try:
                add_sub = pb_utils.InferenceRequest(
                    model_name=ADD_SUB, requested_output_names=["OUTPUT0", "OUTPUT1"], inputs=[a, b])
                sums = outputs_of(add_sub.exec(), ADD_SUB)
                echo = pb_utils.InferenceRequest(
                    model_name=ECHO, requested_output_names=["OUT0"],
                    inputs=[pb_utils.Tensor("IN0", a.as_numpy().astype(np.int32))])
                echoed = outputs_of(await echo.async_exec(), ECHO)
            except (CallFailed, pb_utils.TritonModelException) as exc:
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))))
                continue
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", sums["OUTPUT0"].as_numpy()),
                pb_utils.Tensor("OUTPUT1", sums["OUTPUT1"].as_numpy()),
                pb_utils.Tensor("ECHO", echoed["OUT0"].as_numpy()),
            ]))
        return responses
'''

CONFIG = model_config(
    MODEL,
    "python",
    [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])],
    [("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4]), ("ECHO", "INT32", [4])],
)


def setup(server: TritonServer, source: str = SOURCE) -> None:
    """Serve the two callees (reference models) and bls_demo."""
    reference.serve(server, [m for m in CALLEES if m not in server.loaded_models()])
    server.python_model(MODEL, source, CONFIG)


@dataclass
class BlsResult:
    """One request to bls_demo and what each callee's statistics counted meanwhile."""

    input0: np.ndarray
    input1: np.ndarray
    outputs: dict[str, np.ndarray]
    calls: dict[str, int]  # callee -> successful requests it served during this call

    @property
    def ok(self) -> bool:
        return (
            np.allclose(self.outputs["OUTPUT0"], self.input0 + self.input1)
            and np.allclose(self.outputs["OUTPUT1"], self.input0 - self.input1)
            and np.array_equal(self.outputs["ECHO"], self.input0.astype(np.int32))
            and all(n == 1 for n in self.calls.values())
        )

    def __repr__(self) -> str:
        lines = [f"bls_demo: {'ok' if self.ok else 'WRONG'}"]
        lines += [f"  {k:7s} = {v.tolist()}" for k, v in self.outputs.items()]
        lines += [f"  calls on {m}: {n}" for m, n in self.calls.items()]
        return "\n".join(lines)


def call(server: TritonServer, protocol: str = "http") -> BlsResult:
    """Send one request to bls_demo; an unloaded callee raises InferenceError naming it."""
    a = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    b = np.array([0.5, 0.25, 2.0, 8.0], dtype=np.float32)
    loaded = set(server.loaded_models())  # an unloaded callee has no statistics to read
    before = {m: model_stats(server, m, settle=True) for m in CALLEES if m in loaded}
    outputs = infer(server, MODEL, {"INPUT0": a, "INPUT1": b}, ["OUTPUT0", "OUTPUT1", "ECHO"], protocol=protocol)
    calls = {m: model_stats(server, m, settle=True).since(s).success_count for m, s in before.items()}
    return BlsResult(a, b, outputs, calls)


def missing_callee_error(server: TritonServer, callee: str = CALLEES[1]) -> str:
    """Unload ``callee``, send a request to bls_demo and return the error the client got; the callee
    is loaded again afterwards. Raises if the request unexpectedly succeeded."""
    server.unload(callee)
    try:
        call(server)
    except InferenceError as exc:
        return str(exc)
    finally:
        server.load(callee)
    raise LessonOutcomeError(
        model=MODEL,
        happened="answered",
        expected=f"{callee!r} was unloaded",
        check="check its error handling (an error response of a BLS call must become bls_demo's error)",
    )


def run(server: TritonServer) -> Outcome:
    """Both calls answer, each callee counts one request, and a missing callee is named in the error."""
    setup(server)
    result = call(server)
    named = CALLEES[1] in missing_callee_error(server)
    return Outcome(result.ok and named, {"calls": result.calls, "missing_model_error": named})
