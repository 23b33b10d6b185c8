"""Lesson: request rescheduling, one request executed several times.

``request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)`` hands a request back to
Triton's scheduler instead of releasing it: it comes back in a later ``execute``, where the model goes on
with it. The python_backend README (r23.12, "Request Rescheduling") sets two conditions:

- the config enables iterative sequences, ``sequence_batching { iterative_sequence: true }``; Triton's
  iterative sequencer then gives each request without a sequence id one of its own (core r23.12,
  src/sequence_batch_scheduler/sequence_utils.h:76-86), which a model can key its progress by;
- a model that is not decoupled puts ``None`` in its list of responses for a rescheduled request (the
  stub refuses anything else, python_backend r23.12 src/pb_stub.cc:798-812); a decoupled one reschedules
  before ``execute`` returns and sends what it has through the response sender.

``collatz_steps`` takes one Collatz step per execution (n -> n/2 or 3n+1) and answers once n reaches 1;
``countdown_rescheduled`` (decoupled) sends one response per execution. Without ``iterative_sequence``
Triton refuses the release ("... while the model is not configured to handle such a flag.", core r23.12
src/infer_request.cc:117-123), releases the request, and its client never gets an answer:
labkit raises RequestDroppedError.

    lab = labkit.start()
    rescheduling.setup(lab)
    print(rescheduling.collatz(lab, 6))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...client.inference import infer, stream_infer
from ...observe.stats import model_stats
from ...plumbing.polling import wait_until
from ...repository import ModelConfig, model_config
from ...server.base import TritonServer
from .outcome import Outcome

MODEL = "collatz_steps"
STREAM_MODEL = "countdown_rescheduled"
NOT_ITERATIVE = "collatz_not_iterative"  # the same model.py, without iterative_sequence

SOURCE = '''"""collatz_steps: STEPS = Collatz steps from N down to 1, one step per execution of the same request."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.progress = {}  # sequence id -> (value now, steps so far)

    def execute(self, requests):
        responses = []
        for request in requests:
            # Triton's iterative sequencer gives every request a sequence id of its own
            key = request.correlation_id()
            if key not in self.progress:
                self.progress[key] = (int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0]), 0)
            value, steps = self.progress[key]
            if value > 1:
                self.progress[key] = (value // 2 if value % 2 == 0 else 3 * value + 1, steps + 1)
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)  # a rescheduled request gets no response yet
            else:
                del self.progress[key]
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("STEPS", np.array([steps], np.int32))]))
        return responses
'''

STREAM_SOURCE = '''"""countdown_rescheduled (decoupled): one response per execution, OUT = N-1, ..., 0, then the final flag."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.remaining = {}  # sequence id -> responses still to send

    def execute(self, requests):
        for request in requests:
            key = request.correlation_id()
            if key not in self.remaining:
                self.remaining[key] = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            self.remaining[key] -= 1
            response = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([self.remaining[key]], np.int32))])
            sender = request.get_response_sender()
            if self.remaining[key] <= 0:
                del self.remaining[key]
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                # rescheduled before execute returns, as a decoupled model must
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                sender.send(response)
        return None
'''


def config(name: str, *, iterative: bool = True, decoupled: bool = False) -> ModelConfig:
    """An INT32 input N and one INT32 output; ``sequence_batching { iterative_sequence: true }`` if ``iterative``."""
    output = ("OUT", "INT32", [1]) if decoupled else ("STEPS", "INT32", [1])
    cfg = model_config(name, "python", [("N", "INT32", [1])], [output])
    if iterative:
        cfg.sequence_batching.iterative_sequence = True
    cfg.model_transaction_policy.decoupled = decoupled
    return cfg


CONFIG = config(MODEL)
STREAM_CONFIG = config(STREAM_MODEL, decoupled=True)
NOT_ITERATIVE_CONFIG = config(NOT_ITERATIVE, iterative=False)


def setup(server: TritonServer) -> None:
    """Serve collatz_steps, countdown_rescheduled and collatz_not_iterative."""
    server.python_model(MODEL, SOURCE, CONFIG)
    server.python_model(STREAM_MODEL, STREAM_SOURCE, STREAM_CONFIG)
    server.python_model(NOT_ITERATIVE, SOURCE, NOT_ITERATIVE_CONFIG)


def collatz_reference(n: int) -> int:
    steps = 0
    while n > 1:
        n, steps = (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1
    return steps


@dataclass
class Rounds:
    """One request to collatz_steps, and what Triton's statistics counted for it."""

    n: int
    steps: int
    requests: int  # inference_count during the call
    executions: int  # execution_count during the call

    @property
    def ok(self) -> bool:
        return self.steps == collatz_reference(self.n) and self.requests == 1 and self.executions == self.steps + 1

    def __repr__(self) -> str:
        return (
            f"{MODEL}: N = {self.n} -> STEPS = {self.steps} (expected {collatz_reference(self.n)})\n"
            f"  Triton's statistics: {self.requests} request, {self.executions} executions"
        )


def collatz(server: TritonServer, n: int) -> Rounds:
    before = model_stats(server, MODEL, settle=True)
    steps = int(infer(server, MODEL, {"N": np.array([n], np.int32)})["STEPS"][0])
    # Triton records the request just after its answer: wait for it, then for the counts to settle.
    wait_until(lambda: model_stats(server, MODEL).since(before).inference_count >= 1, 10.0, f"{MODEL}'s statistics")
    delta = model_stats(server, MODEL, settle=True).since(before)
    return Rounds(n, steps, delta.inference_count, delta.execution_count)


def countdown(server: TritonServer, n: int) -> list[int]:
    """countdown_rescheduled's responses to one request of N = ``n``, over a gRPC stream."""
    return [int(r["OUT"][0]) for r in stream_infer(server, STREAM_MODEL, {"N": np.array([n], np.int32)})]


def run(server: TritonServer) -> Outcome:
    """One request, many executions; a decoupled model streams one response per execution."""
    setup(server)
    rounds = collatz(server, 6)
    streamed = countdown(server, 4)
    ok = rounds.ok and streamed == [3, 2, 1, 0]
    return Outcome(ok, {"collatz_executions": rounds.executions, "countdown": streamed})
