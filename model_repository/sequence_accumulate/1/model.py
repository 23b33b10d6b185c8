"""sequence_accumulate: OUTPUT is the running sum of INPUT over the requests of a sequence so far.

The sequence batcher gives every request four control inputs (config.pbtxt): START is 1 on a
sequence's first request, END on its last, READY on every request of a live sequence, and CORRID is
its sequence id. The sum of each live sequence is kept here, by CORRID. A batch slot with no request
of a live sequence carries a "null request", READY 0, whose other inputs (CORRID too) mean nothing:
it is answered, and its answer thrown away by Triton, without touching any sum.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


def _scalar(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}  # sequence id -> running sum

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            if not _scalar(request, "READY"):  # a null request: no sequence behind it
                total = 0
            else:
                sequence = _scalar(request, "CORRID")
                if _scalar(request, "START"):
                    self.sums[sequence] = 0
                total = self.sums.get(sequence, 0) + int(x.sum())
                self.sums[sequence] = total
                if _scalar(request, "END"):
                    del self.sums[sequence]
            out = np.full(x.shape, total, dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
