"""Lesson: a decoupled C++ backend, several responses per request through a response factory.

The C++ side of ``decoupled`` (repeat_py), written against Triton's C API alone: the backend makes a
factory for the request (``TRITONBACKEND_ResponseFactoryNew``), sends any number of responses made
from it (``TRITONBACKEND_ResponseNewFromFactory`` + ``TRITONBACKEND_ResponseSend`` without the final
flag), ends the request with ``TRITONBACKEND_ResponseFactorySendFlags(factory,
TRITONSERVER_RESPONSE_COMPLETE_FINAL)`` and deletes the factory (``TRITONBACKEND_ResponseFactoryDelete``,
held by a ``std::unique_ptr`` so that every path deletes it). Between responses it asks
``TRITONBACKEND_ResponseFactoryIsCancelled`` and stops once the client has cancelled (see
``cancellation``). The model's config says ``model_transaction_policy { decoupled: true }``.

    lab = labkit.start()
    decoupled_cpp.setup(lab)
    print(decoupled_cpp.repeat(lab, [4, 8, 15]))
"""

from __future__ import annotations

import queue
from collections.abc import Sequence

import numpy as np

from ...client.inference import stream_infer
from ...repository import model_config
from ...server.base import TritonServer
from ._c_logging import LOG_HELPERS
from .decoupled import RepeatResult
from .outcome import Outcome

BACKEND = "repeatcpp"
MODEL = "repeat_cpp"

SOURCE = (
    r"""// repeatcpp: decoupled. One response per element of IN (OUT = the element, IDX = its position),
// DELAY_MS apart, then the final flag; it stops early when the client cancels the request.
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "triton/core/tritonbackend.h"

"""
    + LOG_HELPERS
    + r"""
// The factory must be deleted on every path out of execute: a unique_ptr does it.
struct FactoryDelete {
  void operator()(TRITONBACKEND_ResponseFactory* factory) const {
    log_if_error("ResponseFactoryDelete", TRITONBACKEND_ResponseFactoryDelete(factory));
  }
};
using Factory = std::unique_ptr<TRITONBACKEND_ResponseFactory, FactoryDelete>;

// All of an INT32 input's values, whatever buffers Triton holds them in.
static TRITONSERVER_Error* read_int32s(TRITONBACKEND_Request* request, const char* name, std::vector<int32_t>* values) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, name, &input);
  if (err != nullptr) return err;
  uint64_t bytes = 0;
  uint32_t buffers = 0;
  err = TRITONBACKEND_InputProperties(input, nullptr, nullptr, nullptr, nullptr, &bytes, &buffers);
  if (err != nullptr) return err;
  values->resize(bytes / sizeof(int32_t));
  char* to = reinterpret_cast<char*>(values->data());
  for (uint32_t b = 0; b < buffers; ++b) {
    const void* data = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    err = TRITONBACKEND_InputBuffer(input, b, &data, &size, &memory, &memory_id);
    if (err != nullptr) return err;
    std::memcpy(to, data, size);
    to += size;
  }
  return nullptr;
}

static TRITONSERVER_Error* set_one(TRITONBACKEND_Response* response, const char* name, TRITONSERVER_DataType type,
                                   const void* value) {  // a [1] tensor of a 4-byte type
  const int64_t shape[1] = {1};
  TRITONBACKEND_Output* output = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseOutput(response, &output, name, type, shape, 1);
  if (err != nullptr) return err;
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  err = TRITONBACKEND_OutputBuffer(output, &buffer, 4, &memory, &memory_id);
  if (err != nullptr) return err;
  std::memcpy(buffer, value, 4);
  return nullptr;
}

// Every response but the final flag; NULL when all were sent, else the error to end the request with.
static TRITONSERVER_Error* repeat(TRITONBACKEND_Request* request, TRITONBACKEND_ResponseFactory* factory) {
  std::vector<int32_t> values, delay;
  TRITONSERVER_Error* err = read_int32s(request, "IN", &values);
  if (err == nullptr) err = read_int32s(request, "DELAY_MS", &delay);
  if (err != nullptr) return err;
  if (delay.size() != 1 || delay[0] < 0 || delay[0] > 1000) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "DELAY_MS must be one number, 0 to 1000");
  }
  for (uint32_t i = 0; i < values.size(); ++i) {
    bool cancelled = false;
    err = TRITONBACKEND_ResponseFactoryIsCancelled(factory, &cancelled);
    if (err != nullptr) return err;
    if (cancelled) {
      log_info("repeatcpp: cancelled after " + std::to_string(i) + " of " + std::to_string(values.size()) + " responses");
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_CANCELLED, "repeatcpp: the request was cancelled");
    }
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay[0]));
    TRITONBACKEND_Response* response = nullptr;
    err = TRITONBACKEND_ResponseNewFromFactory(&response, factory);
    if (err != nullptr) return err;
    err = set_one(response, "OUT", TRITONSERVER_TYPE_INT32, &values[i]);
    if (err == nullptr) err = set_one(response, "IDX", TRITONSERVER_TYPE_UINT32, &i);
    if (err != nullptr) {
      log_if_error("ResponseDelete", TRITONBACKEND_ResponseDelete(response));  // never sent: still ours
      return err;
    }
    err = TRITONBACKEND_ResponseSend(response, 0, nullptr);  // flags 0: more may follow
    if (err != nullptr) return err;
  }
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  for (uint32_t r = 0; r < count; ++r) {
    TRITONBACKEND_ResponseFactory* made = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseFactoryNew(&made, requests[r]);
    Factory factory(made);  // deleted at the end of this iteration, whichever way it goes
    if (err == nullptr) err = repeat(requests[r], factory.get());
    if (err == nullptr) {  // the end of the request: a flag, no response
      log_if_error("ResponseFactorySendFlags",
                   TRITONBACKEND_ResponseFactorySendFlags(factory.get(), TRITONSERVER_RESPONSE_COMPLETE_FINAL));
    } else {  // or a last response carrying the error, final (without a factory, made from the request)
      TRITONBACKEND_Response* response = nullptr;
      TRITONSERVER_Error* new_err = factory ? TRITONBACKEND_ResponseNewFromFactory(&response, factory.get())
                                            : TRITONBACKEND_ResponseNew(&response, requests[r]);
      if (new_err == nullptr) {
        log_if_error("ResponseSend", TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
      } else {
        log_if_error("ResponseNew", new_err);
      }
      TRITONSERVER_ErrorDelete(err);  // the response took a copy: the error stays ours
    }
    log_if_error("RequestRelease", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
  }
  return nullptr;  // every request was answered and released: nothing for Triton to fail
}"""
)

CONFIG = model_config(
    MODEL, BACKEND, [("IN", "INT32", [-1]), ("DELAY_MS", "INT32", [1])], [("OUT", "INT32", [1]), ("IDX", "UINT32", [1])]
)
CONFIG.model_transaction_policy.decoupled = True


def setup(server: TritonServer, source: str = SOURCE) -> None:
    """Build the backend and serve its decoupled model."""
    server.repository.write_config(CONFIG)
    server.cpp_backend(BACKEND, source, [MODEL])


def inputs(values: Sequence[int], delay_ms: int = 0) -> dict[str, np.ndarray]:
    return {"IN": np.asarray(values, dtype=np.int32), "DELAY_MS": np.array([delay_ms], np.int32)}


def repeat(server: TritonServer, values: Sequence[int], delay_ms: int = 0) -> RepeatResult:
    """One request to repeat_cpp over a gRPC stream (``labkit.stream_infer``); its responses in order."""
    responses = stream_infer(server, MODEL, inputs(values, delay_ms))
    return RepeatResult(
        [int(v) for v in values],
        [int(r["OUT"][0]) for r in responses],
        [int(r["IDX"][0]) for r in responses],
        model=MODEL,
    )


def raw_stream(
    server: TritonServer, values: Sequence[int], delay_ms: int = 0, timeout_s: float = 30.0
) -> list[tuple[dict[str, list[int]], bool]]:
    """One request over a tritonclient gRPC stream, asking for an empty final response: every response
    as (outputs, the parameter ``triton_final_response``), up to and including the final one."""
    import tritonclient.grpc as grpcclient

    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
    tensors = []
    for name, array in inputs(values, delay_ms).items():
        tensor = grpcclient.InferInput(name, list(array.shape), "INT32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    seen: list[tuple[dict[str, list[int]], bool]] = []
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        client.async_stream_infer(MODEL, tensors, enable_empty_final_response=True)
        while True:
            result, error = answers.get(timeout=timeout_s)
            if error is not None:
                raise error
            response = result.get_response()
            final = response.parameters["triton_final_response"].bool_param
            seen.append(({o.name: result.as_numpy(o.name).tolist() for o in response.outputs}, final))
            if final:
                return seen
    finally:
        client.stop_stream()
        client.close()


def run(server: TritonServer) -> Outcome:
    """Six values in, six responses back in order, then the final flag alone."""
    setup(server)
    result = repeat(server, [4, 8, 15, 16, 23, 42])
    flags = [final for _, final in raw_stream(server, [1, 2, 3])]
    ok = result.ok and flags == [False, False, False, True]
    return Outcome(ok, {"responses": len(result.values), "in_order": result.ok, "final_flags": flags})
