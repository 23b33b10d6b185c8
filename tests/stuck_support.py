"""Models that hang, shared by the tests of stuck models (test_stuck, test_load_timeout) and their Docker runs
(test_docker_backends): a Python execute or initialize that never returns, a C++ execute that spins."""

from __future__ import annotations

import numpy as np

import labkit

CONFIG = labkit.model_config("hang", "python", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])])


HANGING = """import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        value = {value}
        {body}
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT0", np.full(4, value, np.float32))])
                for request in requests]
"""


HANG_LINE = 9  # the {body} line above


X = {"IN0": np.zeros(4, np.float32)}


SPINNING = r"""
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch&) {
    volatile unsigned long spins = 0;
    while (true) {
      spins = spins + 1;  // the endless loop
    }
  });
}
"""


SPIN_LINE = 9


def hanging(value: int, body: str) -> str:
    return HANGING.format(value=value, body=body)


INITIALIZING = """import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        {body}

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT0", np.full(4, 7, np.float32))])
                for request in requests]
"""


STUCK_LINE = 8  # the {body} line above


SLEEPS = "time.sleep(100000)"


def initializing(body: str) -> str:
    return INITIALIZING.format(body=body)
