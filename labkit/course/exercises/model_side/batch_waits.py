"""model.py of 03-preferred's check model: add_sub, plus a line in report.jsonl (in the model's folder) per
execute() saying how many requests it held and how long the oldest of them had waited.

Each request's INPUT0 carries, in its first two values, the time.monotonic() at which the check's client
built it (whole seconds, then the fraction: float32 holds either exactly enough). execute() reads the
same clock when it starts, so "waited" is at least the time the request spent in Triton's queue: a batch
whose every request waited less than the queue delay was not sent because the delay ran out.
"""

import json
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # open for the model's life, one line written (and flushed) per execute()
        self.report = open(os.path.join(args["model_repository"], "report.jsonl"), "a", buffering=1)  # noqa: SIM115

    def execute(self, requests):
        started = time.monotonic()
        waited, responses = [], []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            waited.append(started - (float(a[0, 0]) + float(a[0, 1])))
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)])
            )
        self.report.write(json.dumps({"requests": len(requests), "waited_ms": max(waited) * 1e3}) + "\n")
        return responses

    def finalize(self):
        self.report.close()
