"""Lesson: inference request parameters, sent by a client and read by a Python model and a C++ backend.

A request may carry parameters of its own beside its inputs: string, integer and boolean values by name
(tritonclient's ``infer(..., parameters={...})``, over HTTP and gRPC; Triton's parameters extension). Triton
keeps the ones it uses itself (``sequence_id``, ``priority``, ...) out of them. A Python model reads them
as one JSON text, ``request.parameters()`` (python_backend README r23.12, "Inference Request Parameters");
a C++ backend by index, ``TRITONBACKEND_RequestParameterCount`` and ``TRITONBACKEND_RequestParameter``
(key, type, and a pointer to the value). A BLS request passes parameters on with
``pb_utils.InferenceRequest(..., parameters={...})`` (23.11 and later).

- ``params_py`` answers PARAMS, the text ``request.parameters()`` gave it;
- ``reqparams_scale`` (C++ ``reqparams``, written against ``tritonbackend.h`` alone) multiplies IN0 by the
  integer parameter ``scale`` and returns every parameter on its response as ``seen_<key>``;
- ``params_bls`` asks reqparams_scale through BLS, passing its own request's parameters on.

    lab = labkit.start()
    request_parameters.setup(lab)
    print(request_parameters.python_sees(lab, {"scale": 3, "tag": "x"}))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...client.inference import infer, infer_with_parameters
from ...repository import model_config
from ...server.base import TritonServer
from ._c_logging import LOG_HELPERS
from .outcome import Outcome

PY_MODEL = "params_py"
BACKEND, CPP_MODEL = "reqparams", "reqparams_scale"
BLS_MODEL = "params_bls"

PY_SOURCE = '''"""params_py: PARAMS = the request's parameters, as request.parameters() gives them (a JSON text)."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("PARAMS", np.array([request.parameters().encode()], dtype=object))])
            for request in requests
        ]
'''

SOURCE = (
    r"""// reqparams: OUT0 = IN0 (INT32 [4]) times the request's integer parameter "scale" (1 without one). Every
// parameter a request carries comes back on its response as "seen_<key>", with the same type.
#include <cstdint>
#include <cstring>
#include <string>

#include "triton/core/tritonbackend.h"

"""
    + LOG_HELPERS
    + r"""
// Each parameter by index: its key, its type, and a pointer to its value (a C string, an int64_t or a bool),
// valid until the request is released.
static TRITONSERVER_Error* echo_parameters(
    TRITONBACKEND_Request* request, TRITONBACKEND_Response* response, int64_t* scale) {
  uint32_t count = 0;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestParameterCount(request, &count);
  if (err == nullptr) log_info("reqparams: a request with " + std::to_string(count) + " parameters");
  for (uint32_t i = 0; err == nullptr && i < count; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
    const void* value = nullptr;
    err = TRITONBACKEND_RequestParameter(request, i, &key, &type, &value);
    if (err != nullptr) break;
    const std::string seen = std::string("seen_") + key;
    const bool is_scale = std::strcmp(key, "scale") == 0;
    if (type == TRITONSERVER_PARAMETER_INT) {
      const int64_t number = *static_cast<const int64_t*>(value);
      if (is_scale) *scale = number;
      err = TRITONBACKEND_ResponseSetIntParameter(response, seen.c_str(), number);
    } else if (is_scale) {
      err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "reqparams: 'scale' must be an integer parameter");
    } else if (type == TRITONSERVER_PARAMETER_STRING) {
      err = TRITONBACKEND_ResponseSetStringParameter(response, seen.c_str(), static_cast<const char*>(value));
    } else if (type == TRITONSERVER_PARAMETER_BOOL) {
      err = TRITONBACKEND_ResponseSetBoolParameter(response, seen.c_str(), *static_cast<const bool*>(value));
    }  // BYTES parameters come only from the in-process C API, never over HTTP or gRPC
  }
  return err;
}

static TRITONSERVER_Error* scaled(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response, int64_t scale) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, "IN0", &input);
  const void* in = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  if (err == nullptr) err = TRITONBACKEND_InputBuffer(input, 0, &in, &size, &memory, &memory_id);
  if (err == nullptr && size != 4 * sizeof(int32_t))
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "reqparams: IN0 must hold four INT32 in one buffer");
  const int64_t shape[1] = {4};
  TRITONBACKEND_Output* output = nullptr;
  if (err == nullptr) err = TRITONBACKEND_ResponseOutput(response, &output, "OUT0", TRITONSERVER_TYPE_INT32, shape, 1);
  void* out = nullptr;
  if (err == nullptr) err = TRITONBACKEND_OutputBuffer(output, &out, size, &memory, &memory_id);
  if (err != nullptr) return err;
  for (int k = 0; k < 4; ++k)
    static_cast<int32_t*>(out)[k] = static_cast<int32_t>(scale * static_cast<const int32_t*>(in)[k]);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request** requests, const uint32_t n) {
  for (uint32_t r = 0; r < n; ++r) {
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (err == nullptr) {
      int64_t scale = 1;
      err = echo_parameters(requests[r], response, &scale);
      if (err == nullptr) err = scaled(requests[r], response, scale);
      log_if_error("ResponseSend", TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
    }
    log_if_error("RequestRelease", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  }
  return nullptr;
}
"""
)

BLS_SOURCE = '''"""params_bls: asks reqparams_scale for IN0 through BLS, with this request's parameters passed on."""
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            answer = pb_utils.InferenceRequest(
                model_name="reqparams_scale",
                requested_output_names=["OUT0"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN0")],
                parameters=json.loads(request.parameters()),  # a dict of str, int and bool values
            ).exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(answer.error().message())))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(answer, "OUT0")]))
        return responses
'''

PY_CONFIG = model_config(PY_MODEL, "python", [("IN0", "INT32", [4])], [("PARAMS", "BYTES", [1])])
CPP_CONFIG = model_config(CPP_MODEL, BACKEND, [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
BLS_CONFIG = model_config(BLS_MODEL, "python", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
VALUES = np.array([1, 2, 3, 4], np.int32)


def setup(server: TritonServer) -> None:
    """Serve params_py, build reqparams and serve reqparams_scale, then params_bls."""
    server.python_model(PY_MODEL, PY_SOURCE, PY_CONFIG)
    server.repository.write_config(CPP_CONFIG)
    server.cpp_backend(BACKEND, SOURCE, [CPP_MODEL])
    server.python_model(BLS_MODEL, BLS_SOURCE, BLS_CONFIG)


def python_sees(server: TritonServer, parameters: Mapping[str, Any], protocol: str = "http") -> dict[str, Any]:
    """What ``request.parameters()`` gave params_py, parsed."""
    out = infer(server, PY_MODEL, {"IN0": VALUES}, protocol=protocol, parameters=parameters)
    return json.loads(out["PARAMS"][0])


@dataclass
class Seen:
    """reqparams_scale's answer to a request with ``sent`` parameters."""

    protocol: str
    sent: dict[str, Any]
    out: list[int]
    echoed: dict[str, Any]  # the response's parameters: seen_<key> for each one the backend read

    @property
    def ok(self) -> bool:
        scale = self.sent.get("scale", 1)
        return self.out == [scale * int(v) for v in VALUES] and self.echoed == {
            f"seen_{k}": v for k, v in self.sent.items()
        }

    def __repr__(self) -> str:
        echoed = ", ".join(f"{k}={v!r} ({type(v).__name__})" for k, v in sorted(self.echoed.items()))
        return f"{CPP_MODEL} over {self.protocol}: OUT0 = {self.out}; response parameters: {echoed or 'none'}"


def cpp_answers(server: TritonServer, parameters: Mapping[str, Any], protocol: str = "http") -> Seen:
    out, echoed = infer_with_parameters(server, CPP_MODEL, {"IN0": VALUES}, protocol=protocol, parameters=parameters)
    return Seen(protocol, dict(parameters), out["OUT0"].tolist(), echoed)


def through_bls(server: TritonServer, parameters: Mapping[str, Any]) -> list[int]:
    """params_bls's OUT0: reqparams_scale's answer to a BLS request carrying ``parameters``."""
    return infer(server, BLS_MODEL, {"IN0": VALUES}, parameters=parameters)["OUT0"].tolist()


def run(server: TritonServer) -> Outcome:
    """The same parameters reach Python, C++ (both protocols) and, through BLS, C++ again."""
    setup(server)
    sent = {"scale": 3, "tag": "labkit", "strict": True}
    checks = {
        "python": python_sees(server, sent) == sent,
        **{f"c++ {p}": cpp_answers(server, sent, p).ok for p in ("http", "grpc")},
        "bls": through_bls(server, sent) == [3 * int(v) for v in VALUES],
    }
    return Outcome(all(checks.values()), checks)
