"""Lesson: a C++ backend that notices a cancelled request and stops.

A client that gives up on a request can cancel it: tritonclient's gRPC ``async_infer(...)`` returns a
handle whose ``.cancel()`` ends the call, and ``stop_stream(cancel_requests=True)`` ends a stream with
the requests still in it. Triton 23.12 then marks the request cancelled; a backend that works for a long
time asks ``TRITONBACKEND_RequestIsCancelled`` (``TRITONBACKEND_ResponseFactoryIsCancelled`` with a
factory, as ``decoupled_cpp`` does) between steps, stops, and answers with a
``TRITONSERVER_ERROR_CANCELLED`` error. Nothing stops a backend that never asks.

``slowcount`` counts to STEPS, 10 ms a step, asking before each step. It logs when it starts and where
it stopped, so what happened is read from the log, not from a clock.

    lab = labkit.start()
    cancellation.setup(lab)
    print(cancellation.cancel_midway(lab))
"""

from __future__ import annotations

import queue
import re
from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError
from ...plumbing.polling import wait_until
from ...repository import model_config
from ...server.base import TritonServer
from . import decoupled_cpp
from ._c_logging import LOG_HELPERS
from .outcome import Outcome

BACKEND = "slowcount"
MODEL = "slow_count"

SOURCE = (
    r"""// slowcount: counts to STEPS, one step every 10 ms, and answers DONE = the count. Before each step it asks
// Triton whether the request was cancelled, and if so stops and answers with a CANCELLED error.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "triton/core/tritonbackend.h"

"""
    + LOG_HELPERS
    + r"""
static TRITONSERVER_Error* read_steps(TRITONBACKEND_Request* request, int32_t* steps) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, "STEPS", &input);
  if (err != nullptr) return err;
  const void* data = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  err = TRITONBACKEND_InputBuffer(input, 0, &data, &size, &memory, &memory_id);
  if (err != nullptr) return err;
  if (size != sizeof(int32_t)) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "STEPS: one INT32");
  std::memcpy(steps, data, sizeof(int32_t));
  return nullptr;
}

static TRITONSERVER_Error* count(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response) {
  int32_t steps = 0;
  TRITONSERVER_Error* err = read_steps(request, &steps);
  if (err != nullptr) return err;
  log_info("slowcount: counting to " + std::to_string(steps));
  int32_t done = 0;
  for (; done < steps; ++done) {
    bool cancelled = false;
    err = TRITONBACKEND_RequestIsCancelled(request, &cancelled);
    if (err != nullptr) return err;
    if (cancelled) {
      log_info("slowcount: cancelled after " + std::to_string(done) + " of " + std::to_string(steps) + " steps");
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_CANCELLED, "slowcount: the request was cancelled");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // one step of work
  }
  log_info("slowcount: counted all " + std::to_string(steps) + " steps");
  const int64_t shape[1] = {1};
  TRITONBACKEND_Output* output = nullptr;
  err = TRITONBACKEND_ResponseOutput(response, &output, "DONE", TRITONSERVER_TYPE_INT32, shape, 1);
  if (err != nullptr) return err;
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  err = TRITONBACKEND_OutputBuffer(output, &buffer, sizeof(done), &memory, &memory_id);
  if (err != nullptr) return err;
  std::memcpy(buffer, &done, sizeof(done));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t n) {
  for (uint32_t r = 0; r < n; ++r) {
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (err == nullptr) {
      err = count(requests[r], response);  // a cancelled request gets its CANCELLED error here
      log_if_error("ResponseSend", TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
    }
    log_if_error("RequestRelease", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);  // the response was Triton's to take, the error stays ours
  }
  return nullptr;
}"""
)

CONFIG = model_config(MODEL, BACKEND, [("STEPS", "INT32", [1])], [("DONE", "INT32", [1])])

_STOPPED = re.compile(r"(\w+): cancelled after (\d+) of (\d+) (steps|responses)")


def setup(server: TritonServer, source: str = SOURCE) -> None:
    """Build the backend and serve its model."""
    server.repository.write_config(CONFIG)
    server.cpp_backend(BACKEND, source, [MODEL])


def count(server: TritonServer, steps: int) -> int:
    """One request left alone: DONE, the steps counted."""
    return int(infer(server, MODEL, {"STEPS": np.array([steps], np.int32)})["DONE"][0])


def log_line(server: TritonServer, mark: int, needle: str, timeout_s: float = 30.0) -> str:
    """The first line logged since ``mark`` that holds ``needle``, waited for up to ``timeout_s``."""

    def found() -> str:
        return next((line for line in server.logs.since(mark).splitlines() if needle in line), "")

    return wait_until(found, timeout_s, f"{needle!r} in the server's log")


@dataclass
class Cancelled:
    """A request cancelled by its client while the backend worked on it."""

    model: str
    client: str  # what the client did, and what it got
    done: int  # steps (responses) the backend finished before it saw the cancellation
    total: int  # steps (responses) it was asked for
    unit: str = "steps"

    @property
    def stopped_early(self) -> bool:
        return self.done < self.total

    def __repr__(self) -> str:
        return (
            f"{self.model}: the client {self.client}\n"
            f"  the backend saw the cancellation and stopped before all {self.total} {self.unit}: {self.stopped_early}"
        )


def _stopped(line: str) -> tuple[int, int]:
    match = _STOPPED.search(line)
    if match is None:
        raise ValueError(f"not a cancellation line: {line!r}")
    return int(match.group(2)), int(match.group(3))


def cancel_midway(server: TritonServer, steps: int = 1000) -> Cancelled:
    """Send slow_count ``steps`` over gRPC (``async_infer``), wait until the backend has started, cancel,
    and read from the log where the backend stopped."""
    import tritonclient.grpc as grpcclient

    errors: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
    tensor = grpcclient.InferInput("STEPS", [1], "INT32")
    tensor.set_data_from_numpy(np.array([steps], np.int32))
    try:
        mark = server.logs.mark()
        call = client.async_infer(MODEL, [tensor], callback=lambda result, error: errors.put(error))
        started = f"slowcount: counting to {steps}"
        wait_until(
            lambda: started in server.logs.since(mark) or not errors.empty(), 30.0, f"{started!r} in the server's log"
        )
        if started not in server.logs.since(mark):  # answered before the backend started: nothing to cancel
            error = errors.get()
            reason = error.message() if error is not None else "it answered before the backend started"
            raise InferenceError(
                model=MODEL,
                happened="failed before it could be cancelled",
                reason=reason,
                remedy="send it again; the lesson cancels a request while the backend runs it",
            )
        call.cancel()
        error = errors.get(timeout=30)
        done, total = _stopped(log_line(server, mark, "slowcount: cancelled after"))
    finally:
        client.close()
    got = error.message() if error is not None else "an answer, not an error"
    return Cancelled(MODEL, f"cancelled the call; its callback got: {got}", done, total)


def cancel_stream(server: TritonServer, length: int = 1000, delay_ms: int = 10, after: int = 3) -> Cancelled:
    """Send repeat_cpp ``length`` values over a gRPC stream, read ``after`` responses, then
    ``stop_stream(cancel_requests=True)``; read from the log where the backend stopped."""
    import tritonclient.grpc as grpcclient

    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
    tensors = []
    for name, array in decoupled_cpp.inputs(range(length), delay_ms).items():
        tensor = grpcclient.InferInput(name, list(array.shape), "INT32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    try:
        mark = server.logs.mark()
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        client.async_stream_infer(decoupled_cpp.MODEL, tensors)
        for _ in range(after):
            _, error = answers.get(timeout=30)
            if error is not None:
                raise error
        client.stop_stream(cancel_requests=True)
        done, total = _stopped(log_line(server, mark, "repeatcpp: cancelled after"))
    finally:
        client.close()
    return Cancelled(
        decoupled_cpp.MODEL, f"read {after} responses, then stop_stream(cancel_requests=True)", done, total, "responses"
    )


def run(server: TritonServer) -> Outcome:
    """A cancelled request stops early, in both backends, and both keep serving."""
    setup(server)
    decoupled_cpp.setup(server)
    plain, stream = cancel_midway(server), cancel_stream(server)
    after = count(server, 3) == 3 and decoupled_cpp.repeat(server, [1, 2]).ok
    return Outcome(
        plain.stopped_early and stream.stopped_early and after,
        {
            "slow_count_stopped_early": plain.stopped_early,
            "repeat_cpp_stopped_early": stream.stopped_early,
            "serving_after": after,
        },
    )
