"""Lesson: a decoupled Python model, several responses per request (the "repeat" pattern).

With ``model_transaction_policy { decoupled: true }`` a model answers through a response sender
instead of returning one response per request: any number of responses, then a final flag. A gRPC
stream carries them (``labkit.stream_infer`` collects them in order), and so does HTTP's generate
extension for a request of one element per input (``labkit.generate_stream``); HTTP's ``/infer``
refuses decoupled models.

    lab = labkit.start()
    decoupled.setup(lab)
    print(decoupled.repeat(lab, [4, 8, 15]))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...client.inference import stream_infer
from ...repository import model_config
from ...server.base import TritonServer
from .outcome import Outcome

MODEL = "repeat_py"

SOURCE = '''"""repeat_py: one response per element of IN, each carrying the element and its position."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()
            for index, value in enumerate(values):
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                    pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32)),
                ]))
            # The final flag closes the request; without it the client waits for more.
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None  # decoupled: everything went through the senders
'''

CONFIG = model_config(MODEL, "python", [("IN", "INT32", [-1])], [("OUT", "INT32", [1]), ("IDX", "UINT32", [1])])
CONFIG.model_transaction_policy.decoupled = True


def setup(server: TritonServer, source: str = SOURCE) -> None:
    server.python_model(MODEL, source, CONFIG)


@dataclass
class RepeatResult:
    """What went in, and the responses that came back, in arrival order."""

    sent: list[int]
    values: list[int]
    indices: list[int]
    model: str = MODEL  # the C++ lesson's repeat_cpp answers the same way (labkit.course.lessons.decoupled_cpp)

    @property
    def ok(self) -> bool:
        """One response per element, in the order sent."""
        return self.values == self.sent and self.indices == list(range(len(self.sent)))

    def __repr__(self) -> str:
        return (
            f"{self.model}: sent {self.sent}, got {len(self.values)} responses {'in order' if self.ok else 'WRONG'}\n"
            f"  OUT = {self.values}\n  IDX = {self.indices}"
        )


def repeat(server: TritonServer, values: Sequence[int]) -> RepeatResult:
    """One request to repeat_py over a gRPC stream; its responses collected in order."""
    responses = stream_infer(server, MODEL, {"IN": np.asarray(values, dtype=np.int32)})
    return RepeatResult(
        [int(v) for v in values],
        [int(r["OUT"][0]) for r in responses],
        [int(r["IDX"][0]) for r in responses],
    )


def run(server: TritonServer) -> Outcome:
    """Six values in, six responses back, in order."""
    setup(server)
    result = repeat(server, [4, 8, 15, 16, 23, 42])
    return Outcome(result.ok, {"responses": len(result.values), "in_order": result.ok})
