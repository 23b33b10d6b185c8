"""Lesson: two instances of one C++ model, each with a state of its own, sharing the model's state.

``instance_group { count: 2 kind: KIND_CPU }`` makes Triton create two instances of the model, each
with its own thread: ``TRITONBACKEND_ModelInstanceInitialize`` runs once per instance (its name, kind
and device from ``TRITONBACKEND_ModelInstanceName`` / ``...Kind`` / ``...DeviceId``; its own object
kept with ``TRITONBACKEND_ModelInstanceSetState``), and two executes can run at the same moment. What
the model's state holds (``TRITONBACKEND_ModelSetState``) is then shared between two threads: a counter
there needs a lock, while a counter in the instance's own state does not. The backend is written
against Triton's C API alone (``triton/core/tritonbackend.h``); notebook 14 compiles it from a cell.

    lab = labkit.start()
    instances.setup(lab)
    print(instances.busy(lab))
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...repository import model_config
from ...server.base import TritonServer
from ._c_logging import LOG_HELPERS
from .outcome import Outcome

BACKEND = "instances"
MODEL = "two_instances"
OUTPUTS = ("INSTANCE", "INSTANCE_COUNT", "MODEL_COUNT", "UNGUARDED_COUNT", "RUNNING")

SOURCE = (
    r"""// instances: one model, two instances (instance_group count 2). Each instance keeps a state of its own;
// the model's state is shared by both, and Triton runs their executes at the same time.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "triton/core/tritonbackend.h"

"""
    + LOG_HELPERS
    + r"""
// One per model, shared by its instances: two threads may use it at once, so changes go under the mutex.
struct ModelState {
  std::mutex mutex;
  int64_t instances = 0;  // instances initialized so far: each takes the next number
  int64_t requests = 0;   // requests served, all instances together
  int64_t running = 0;    // executes in progress right now
  std::atomic<int64_t> unguarded{0};  // the same count kept without the mutex: read, work, write back
};

// One per instance: only that instance's thread uses it, one execute at a time, so no lock.
struct InstanceState {
  std::string name;
  int64_t number = 0;
  int64_t requests = 0;
};

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  auto state = std::make_unique<ModelState>();
  TRITONSERVER_Error* err = TRITONBACKEND_ModelSetState(model, state.get());
  if (err == nullptr) state.release();  // Triton keeps the pointer until ModelFinalize
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &state);
  if (err != nullptr) return err;
  std::unique_ptr<ModelState> shared(static_cast<ModelState*>(state));
  log_info("model state finalized: " + std::to_string(shared->requests) + " requests counted under the mutex, " +
           std::to_string(shared->unguarded.load()) + " without it");
  return nullptr;
}

static TRITONSERVER_Error* model_state_of(TRITONBACKEND_ModelInstance* instance, ModelState** shared) {
  TRITONBACKEND_Model* model = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err != nullptr) return err;
  void* state = nullptr;
  err = TRITONBACKEND_ModelState(model, &state);
  *shared = static_cast<ModelState*>(state);
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  const char* name = nullptr;
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_AUTO;
  int32_t device = 0;
  ModelState* shared = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err == nullptr) err = TRITONBACKEND_ModelInstanceKind(instance, &kind);
  if (err == nullptr) err = TRITONBACKEND_ModelInstanceDeviceId(instance, &device);
  if (err == nullptr) err = model_state_of(instance, &shared);
  if (err != nullptr) return err;  // the load fails with this error
  auto state = std::make_unique<InstanceState>();
  state->name = name;
  {
    std::lock_guard<std::mutex> lock(shared->mutex);  // the model's state: shared
    state->number = ++shared->instances;
  }
  log_info("instance " + state->name + ": kind " + TRITONSERVER_InstanceGroupKindString(kind) + ", device " +
           std::to_string(device) + ", its own state number " + std::to_string(state->number));
  err = TRITONBACKEND_ModelInstanceSetState(instance, state.get());
  if (err == nullptr) state.release();  // Triton keeps the pointer until ModelInstanceFinalize
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != nullptr) return err;
  std::unique_ptr<InstanceState> mine(static_cast<InstanceState*>(state));
  log_info("instance " + mine->name + " finalized after " + std::to_string(mine->requests) + " requests");
  return nullptr;
}

// WORK_MS: how long this request's work takes, 0 to 1000 ms.
static TRITONSERVER_Error* work_ms(TRITONBACKEND_Request* request, int32_t* ms) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, "WORK_MS", &input);
  if (err != nullptr) return err;
  const void* data = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  err = TRITONBACKEND_InputBuffer(input, 0, &data, &size, &memory, &memory_id);
  if (err != nullptr) return err;
  if (size != sizeof(int32_t)) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "WORK_MS: one INT32");
  std::memcpy(ms, data, sizeof(int32_t));
  if (*ms < 0 || *ms > 1000) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                 ("WORK_MS must be 0 to 1000, not " + std::to_string(*ms)).c_str());
  }
  return nullptr;
}

static TRITONSERVER_Error* set_int64(TRITONBACKEND_Response* response, const char* name, int64_t value) {
  const int64_t shape[1] = {1};
  TRITONBACKEND_Output* output = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseOutput(response, &output, name, TRITONSERVER_TYPE_INT64, shape, 1);
  if (err != nullptr) return err;
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  err = TRITONBACKEND_OutputBuffer(output, &buffer, sizeof(value), &memory, &memory_id);
  if (err != nullptr) return err;
  std::memcpy(buffer, &value, sizeof(value));
  return nullptr;
}

static TRITONSERVER_Error* serve(ModelState* shared, InstanceState* mine, TRITONBACKEND_Request* request,
                                 TRITONBACKEND_Response* response) {
  int32_t ms = 0;
  TRITONSERVER_Error* err = work_ms(request, &ms);
  if (err != nullptr) return err;  // refused: counted nowhere
  int64_t running = 0, counted = 0;
  {
    std::lock_guard<std::mutex> lock(shared->mutex);
    running = ++shared->running;
    counted = ++shared->requests;
  }
  const int64_t seen = shared->unguarded.load();               // read ...
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // ... work ...
  shared->unguarded.store(seen + 1);  // ... write back: the other instance's +1 in between is lost
  {
    std::lock_guard<std::mutex> lock(shared->mutex);
    --shared->running;
  }
  ++mine->requests;  // this instance's own state: no lock
  err = set_int64(response, "INSTANCE", mine->number);
  if (err == nullptr) err = set_int64(response, "INSTANCE_COUNT", mine->requests);
  if (err == nullptr) err = set_int64(response, "MODEL_COUNT", counted);
  if (err == nullptr) err = set_int64(response, "UNGUARDED_COUNT", seen + 1);
  if (err == nullptr) err = set_int64(response, "RUNNING", running);
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  ModelState* shared = nullptr;
  void* state = nullptr;
  TRITONSERVER_Error* err = model_state_of(instance, &shared);
  if (err == nullptr) err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != nullptr) return err;  // nothing answered or released yet: Triton fails the requests
  auto* mine = static_cast<InstanceState*>(state);
  for (uint32_t r = 0; r < count; ++r) {
    TRITONBACKEND_Response* response = nullptr;
    err = TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (err == nullptr) {
      err = serve(shared, mine, requests[r], response);
      log_if_error("ResponseSend", TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
    }
    log_if_error("RequestRelease", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);  // the response was Triton's to take, the error stays ours
  }
  return nullptr;
}"""
)

CONFIG = model_config(
    MODEL, BACKEND, [("WORK_MS", "INT32", [1])], [(name, "INT64", [1]) for name in OUTPUTS], instances=2
)


def setup(server: TritonServer, source: str = SOURCE) -> None:
    """Build the backend and serve its model (two CPU instances)."""
    server.repository.write_config(CONFIG)
    server.cpp_backend(BACKEND, source, [MODEL])


def initialized(server: TritonServer) -> list[str]:
    """What ModelInstanceInitialize logged at the model's last load, one line per instance, sorted."""
    lines = server.logs.grep(", its own state number ")
    return sorted(line.split("] ", 1)[1] for line in lines[-2:])


@dataclass
class BusyResult:
    """The answers to ``requests`` requests sent by ``clients`` threads at once, one dict per request."""

    requests: int
    clients: int
    work_ms: int
    answers: list[dict[str, int]]

    def counts(self) -> dict[int, list[int]]:
        """Per instance number: the INSTANCE_COUNT values it answered with, sorted."""
        seen: dict[int, list[int]] = {}
        for answer in self.answers:
            seen.setdefault(answer["INSTANCE"], []).append(answer["INSTANCE_COUNT"])
        return {number: sorted(values) for number, values in sorted(seen.items())}

    @property
    def instance_counts_ok(self) -> bool:
        """Each instance counted 1, 2, ..., n without a gap or a repeat, and the n add up to the requests."""
        counts = self.counts()
        return (
            all(values == list(range(1, len(values) + 1)) for values in counts.values())
            and sum(len(values) for values in counts.values()) == self.requests
        )

    @property
    def model_count_ok(self) -> bool:
        """The counter under the mutex gave every request a different number, 1 to requests."""
        return sorted(a["MODEL_COUNT"] for a in self.answers) == list(range(1, self.requests + 1))

    @property
    def unguarded_total(self) -> int:
        return max((a["UNGUARDED_COUNT"] for a in self.answers), default=0)

    @property
    def most_running(self) -> int:
        return max((a["RUNNING"] for a in self.answers), default=0)

    @property
    def ok(self) -> bool:
        return (
            len(self.counts()) == 2
            and self.instance_counts_ok
            and self.model_count_ok
            and self.most_running == 2
            and self.unguarded_total < self.requests
        )

    def __repr__(self) -> str:
        counts = self.counts()
        lines = [
            f"{self.requests} requests from {self.clients} clients at once, {self.work_ms} ms of work each",
            (
                f"answered by instances {sorted(counts)}; each one's own count ran 1, 2, ... without a gap: "
                f"{self.instance_counts_ok}, together {sum(len(v) for v in counts.values())}"
            ),
            f"executes running at the same time, at most: {self.most_running}",
            (
                f"model state, counter under the mutex: every request a number of its own, 1 to {self.requests}: "
                f"{self.model_count_ok}"
            ),
            (
                f"model state, read-work-write without the mutex: ended below {self.requests} (updates lost): "
                f"{self.unguarded_total < self.requests}"
            ),
        ]
        return "\n".join(lines)


def busy(server: TritonServer, requests: int = 64, clients: int = 8, work_ms: int = 20) -> BusyResult:
    """``requests`` requests from ``clients`` threads (an HTTP client each), all at once; every answer."""
    answers: list[dict[str, int]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    todo = list(range(requests))
    start = threading.Barrier(clients)

    def worker() -> None:
        client = server.client("http")
        try:
            start.wait(timeout=30)
            while True:
                with lock:
                    if not todo or failures:
                        return
                    todo.pop()
                out = infer(server, MODEL, {"WORK_MS": np.array([work_ms], np.int32)}, client=client)
                with lock:
                    answers.append({name: int(out[name][0]) for name in OUTPUTS})
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            with lock:
                failures.append(exc)
            start.abort()
        finally:
            client.close()

    threads = [threading.Thread(target=worker, name=f"labkit-instances-{i}") for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    real = [f for f in failures if not isinstance(f, threading.BrokenBarrierError)]
    if real or failures:
        raise (real or failures)[0]
    return BusyResult(requests, clients, work_ms, answers)


_FINALIZED = re.compile(r"instance (\S+) finalized after (\d+) requests")


def finalized(server: TritonServer, mark: int) -> dict[str, int]:
    """After an unload: what each ModelInstanceFinalize logged since ``mark``, requests per instance name."""
    return {m.group(1): int(m.group(2)) for m in _FINALIZED.finditer(server.logs.since(mark))}


def run(server: TritonServer) -> Outcome:
    """Two instances, each with its own count; the model's count right only under the mutex."""
    setup(server)
    result = busy(server, requests=32, clients=4, work_ms=10)
    return Outcome(
        result.ok,
        {
            "instances": len(result.counts()),
            "most_running": result.most_running,
            "model_count_ok": result.model_count_ok,
            "instance_counts_ok": result.instance_counts_ok,
            "unguarded_lost": result.requests - result.unguarded_total,
        },
    )
