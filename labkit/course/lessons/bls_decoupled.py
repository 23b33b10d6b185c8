"""Lesson: BLS over a decoupled model, and what 23.12 refuses there.

``request.exec(decoupled=True)`` returns an iterator over every response a decoupled callee sends;
the last one, which only carries the final flag, has no outputs. ``bls_repeat_doubled`` is itself
decoupled: it streams each of repeat_py's responses on to its own client as it arrives, doubled. A plain
``exec()`` on a decoupled callee answers with an error that asks for ``decoupled=True``.

``async_exec`` is refused in a decoupled model: the stub raises "Async BLS request execution is not
support in the decoupled API." whatever its ``decoupled=`` says (python_backend r23.12, src/pb_stub.cc:
1664-1672; the README's "Limitation": async BLS is not supported in decoupled mode). A model that is not
decoupled may await ``async_exec(decoupled=True)`` (the official bls_decoupled async example does).

    lab = labkit.start()
    bls_decoupled.setup(lab)
    print(bls_decoupled.doubled(lab, [4, 8, 15]))
    print(bls_decoupled.async_refused(lab))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...client.inference import stream_infer
from ...errors import InferenceError, LessonOutcomeError
from ...repository import model_config
from ...server.base import TritonServer
from . import decoupled
from .outcome import Outcome

MODEL = "bls_repeat_doubled"
REFUSED = "bls_async_in_decoupled"
CALLEE = decoupled.MODEL  # repeat_py: one response per element of IN, then the final flag
#: What the 23.12 stub raises for async_exec in a decoupled model (pb_stub.cc, r23.12).
ASYNC_REFUSAL = "Async BLS request execution is not support in the decoupled API."

SOURCE = '''"""bls_repeat_doubled (decoupled): streams each of repeat_py's responses on, OUT doubled, as it arrives."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            call = pb_utils.InferenceRequest(
                model_name="repeat_py",
                requested_output_names=["OUT", "IDX"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
            )
            # decoupled=True: an iterator over every response repeat_py sends, not one response
            for answer in call.exec(decoupled=True):
                if answer.has_error():
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(answer.error().message())))
                    break
                if not answer.output_tensors():
                    continue  # the last response carries only repeat_py's final flag
                out = pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", (2 * out).astype(np.int32)),
                    pb_utils.get_output_tensor_by_name(answer, "IDX"),
                ]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

REFUSED_SOURCE = '''"""bls_async_in_decoupled (decoupled): tries async_exec, which 23.12 refuses in a decoupled model."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            call = pb_utils.InferenceRequest(
                model_name="repeat_py",
                requested_output_names=["OUT", "IDX"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
            )
            try:
                call.async_exec(decoupled=True)  # refused before anything is sent
                error = pb_utils.TritonError("async_exec was accepted")
            except pb_utils.TritonModelException as exc:
                error = pb_utils.TritonError(f"{type(exc).__name__}: {exc}")
            sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


def _config(name: str):
    config = model_config(name, "python", [("IN", "INT32", [-1])], [("OUT", "INT32", [1]), ("IDX", "UINT32", [1])])
    config.model_transaction_policy.decoupled = True
    return config


CONFIG = _config(MODEL)
REFUSED_CONFIG = _config(REFUSED)


def setup(server: TritonServer) -> None:
    """Serve repeat_py (the callee), bls_repeat_doubled and bls_async_in_decoupled."""
    if CALLEE not in server.loaded_models():
        decoupled.setup(server)
    server.python_model(MODEL, SOURCE, CONFIG)
    server.python_model(REFUSED, REFUSED_SOURCE, REFUSED_CONFIG)


@dataclass
class Doubled:
    """One request to bls_repeat_doubled over a gRPC stream, and the responses it streamed."""

    sent: list[int]
    values: list[int]
    indices: list[int]

    @property
    def ok(self) -> bool:
        return self.values == [2 * v for v in self.sent] and self.indices == list(range(len(self.sent)))

    def __repr__(self) -> str:
        return (
            f"{MODEL}: sent {self.sent}, streamed {len(self.values)} responses {'in order' if self.ok else 'WRONG'}\n"
            f"  OUT = {self.values}\n  IDX = {self.indices}"
        )


def doubled(server: TritonServer, values: Sequence[int]) -> Doubled:
    responses = stream_infer(server, MODEL, {"IN": np.asarray(values, dtype=np.int32)})
    return Doubled(
        [int(v) for v in values], [int(r["OUT"][0]) for r in responses], [int(r["IDX"][0]) for r in responses]
    )


def async_refused(server: TritonServer) -> str:
    """The error bls_async_in_decoupled's client gets: the stub's refusal of async_exec, passed on."""
    try:
        stream_infer(server, REFUSED, {"IN": np.array([1, 2], np.int32)})
    except InferenceError as exc:
        return exc.reason or str(exc)
    raise LessonOutcomeError(
        model=REFUSED,
        happened="answered without an error",
        expected="23.12's stub refuses async_exec in a decoupled model",
        check="check that the server is Triton 23.12",
    )


def run(server: TritonServer) -> Outcome:
    """Streamed through and doubled; async_exec refused in a decoupled model."""
    setup(server)
    result = doubled(server, [4, 8, 15, 16])
    refused = ASYNC_REFUSAL in async_refused(server)
    return Outcome(result.ok and refused, {"responses": len(result.values), "async_refused": refused})
