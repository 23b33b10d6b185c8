"""Lesson: BLS over a stateful model.

A sequence model keeps state per sequence, so every request to it names its sequence (a correlation id)
and says whether it starts or ends it (flags). A BLS request sets them with ``pb_utils.InferenceRequest(
..., correlation_id=..., flags=...)``: ``pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START`` and
``..._SEQUENCE_END``, OR-ed for a sequence of one request. ``bls_accumulate`` is not stateful itself: it
reads its own request's sequence id and flags (``request.correlation_id()``, ``request.flags()``: the
client's ``sequence_id``, ``sequence_start``, ``sequence_end``) and hands them on to sequence_accumulate,
the reference model that keeps one running sum per sequence. Interleaved sequences keep their own sums.

    lab = labkit.start()
    bls_stateful.setup(lab)
    print(bls_stateful.interleave(lab, {1: [1, 2, 3], 2: [10, 20, 30]}))
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ...repository import model_config
from ...server.base import TritonServer
from .. import reference
from . import stateful
from .outcome import Outcome

MODEL = "bls_accumulate"
CALLEE = stateful.PY_MODEL  # sequence_accumulate: OUTPUT = the running sum of INPUT over its sequence

SOURCE = '''"""bls_accumulate: hands each request on to sequence_accumulate in the same sequence, with the same flags."""
import triton_python_backend_utils as pb_utils

START = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
END = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            sequence, flags = request.correlation_id(), request.flags()
            pb_utils.Logger.log_info(
                f"bls_accumulate: sequence {sequence} start={bool(flags & START)} end={bool(flags & END)}"
            )
            answer = pb_utils.InferenceRequest(
                model_name="sequence_accumulate",
                requested_output_names=["OUTPUT"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT")],
                correlation_id=sequence,  # the sequence the callee keeps its sum for
                flags=flags,              # START on its first request, END on its last
            ).exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(answer.error().message())))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(answer, "OUTPUT")]))
        return responses
'''

# sequence_accumulate batches up to 4 sequences with INPUT [1]: one request of it is [1, 1].
CONFIG = model_config(MODEL, "python", [("INPUT", "INT32", [1, 1])], [("OUTPUT", "INT32", [1, 1])])

_LINE = re.compile(r"bls_accumulate: sequence (\d+) start=(True|False) end=(True|False)")


def setup(server: TritonServer, source: str = SOURCE) -> None:
    """Serve sequence_accumulate (reference) and bls_accumulate."""
    if CALLEE not in server.loaded_models():
        reference.serve(server, [CALLEE])
    server.python_model(MODEL, source, CONFIG)


def interleave(
    server: TritonServer, sequences: Mapping[int, Sequence[int]], protocol: str = "http"
) -> stateful.Interleaved:
    """Send ``sequences`` (id -> values) round-robin to bls_accumulate (see stateful.interleave)."""
    return stateful.interleave(server, MODEL, sequences, protocol)


def handed_on(server: TritonServer, mark: int) -> list[tuple[int, bool, bool]]:
    """(sequence, start, end) of every request bls_accumulate handed on since ``mark``, from its log lines."""
    server.logs.settle()  # a stub's log line can land just after its answer
    return [(int(s), a == "True", b == "True") for s, a, b in _LINE.findall(server.logs.since(mark))]


def run(server: TritonServer) -> Outcome:
    """Two interleaved sequences through BLS, over HTTP and gRPC, each with its own running sum."""
    setup(server)
    checks = {p: interleave(server, {1: [3, 4, 5], 2: [10, -10, 7]}, p).ok for p in ("http", "grpc")}
    return Outcome(all(checks.values()), checks)
