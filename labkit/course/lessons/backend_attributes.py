"""Lesson: what a C++ backend tells Triton about itself, and the memory its models hold.

Written against ``tritonbackend.h`` alone, ``backendattrs`` shows the rest of the backend README's API:

- ``TRITONBACKEND_BackendSetExecutionPolicy`` (in ``TRITONBACKEND_Initialize``): DEVICE_BLOCKING makes a
  model's instances on one GPU share one backend thread (core r23.12 src/backend_model_instance.h:145-149,
  backend_model_instance.cc:329-340); it changes nothing for KIND_CPU instances, and Triton overrides it to
  BLOCKING for a sequence model (backend_model.cc:303-316).
- ``TRITONBACKEND_GetBackendAttribute``, which Triton calls once right after ``TRITONBACKEND_Initialize``
  (backend_manager.cc:83-95; an error it returns is not even looked at: line 95 drops the status):
  ``TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup`` gives a config without ``instance_group`` the
  first group this machine can run (KIND_GPU ones are skipped without a GPU: model_config_utils.cc:776-803),
  and ``TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading`` lets Triton initialize a model's
  instances at once, each on a thread of its own (backend_model.cc:502-518: std::launch::async instead of
  deferred).
- ``TRITONBACKEND_ModelReportMemoryUsage`` and ``TRITONBACKEND_ModelInstanceReportMemoryUsage``: a list of
  ``TRITONSERVER_BufferAttributes`` (memory type, device, bytes). 23.12 shows them in one place only, a
  model's statistics (``memory_usage``, the model's and its instances' added up per memory type and device:
  tritonserver.cc:2856-2871, model.h:168-185; HTTP and gRPC alike); no metric carries them (Triton's
  memory gauges, metrics.cc:185-220, are the machine's).

``backendattrs_serial`` is the same source built with ``PARALLEL_LOADING=0``.

    lab = labkit.start(log_verbose=1)
    print(backend_attributes.load(lab, parallel=True))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...client.inference import infer
from ...repository import ModelConfig, model_config
from ...server.base import TritonServer
from ._c_logging import LOG_HELPERS
from .outcome import Outcome

BACKEND, SERIAL_BACKEND = "backendattrs", "backendattrs_serial"
MODEL, SERIAL_MODEL = "attrs_parallel", "attrs_serial"
MODEL_BYTES, INSTANCE_BYTES = 1 << 20, 64 << 10  # as the source says

SOURCE = (
    r"""// backendattrs: what a backend tells Triton about itself (execution policy, preferred instance groups,
// parallel instance loading), and the memory its models and instances hold (reported, so statistics show it).
// OUT0 = IN0 (INT32 [4]).
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "triton/core/tritonbackend.h"

#ifndef PARALLEL_LOADING
#define PARALLEL_LOADING 1
#endif

constexpr uint64_t MODEL_BYTES = 1 << 20;       // held by the model: a stand-in for its weights
constexpr uint64_t INSTANCE_BYTES = 64 << 10;   // held by each instance: its scratch space

"""
    + LOG_HELPERS
    + r"""
struct AttributesDelete {
  void operator()(TRITONSERVER_BufferAttributes* attributes) const {
    log_if_error("BufferAttributesDelete", TRITONSERVER_BufferAttributesDelete(attributes));
  }
};
using Attributes = std::unique_ptr<TRITONSERVER_BufferAttributes, AttributesDelete>;

// One usage record: `bytes` of CPU memory (device 0). Triton copies it; ours is deleted on return.
static TRITONSERVER_Error* cpu_usage(uint64_t bytes, Attributes* usage) {
  TRITONSERVER_BufferAttributes* raw = nullptr;
  TRITONSERVER_Error* err = TRITONSERVER_BufferAttributesNew(&raw);
  if (err != nullptr) return err;
  usage->reset(raw);
  err = TRITONSERVER_BufferAttributesSetMemoryType(raw, TRITONSERVER_MEMORY_CPU);
  if (err == nullptr) err = TRITONSERVER_BufferAttributesSetMemoryTypeId(raw, 0);
  if (err == nullptr) err = TRITONSERVER_BufferAttributesSetByteSize(raw, bytes);
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  // DEVICE_BLOCKING: the instances of a model on one GPU share one thread (BLOCKING, the default: one each).
  TRITONSERVER_Error* err = TRITONBACKEND_BackendSetExecutionPolicy(backend, TRITONBACKEND_EXECUTION_DEVICE_BLOCKING);
  TRITONBACKEND_ExecutionPolicy policy = TRITONBACKEND_EXECUTION_BLOCKING;
  if (err == nullptr) err = TRITONBACKEND_BackendExecutionPolicy(backend, &policy);
  if (err == nullptr)
    log_info(std::string("backendattrs: execution policy ") +
             (policy == TRITONBACKEND_EXECUTION_DEVICE_BLOCKING ? "DEVICE_BLOCKING" : "BLOCKING"));
  return err;
}

// Triton asks once, right after TRITONBACKEND_Initialize.
TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend*, TRITONBACKEND_BackendAttribute* attributes) {
  // A config without instance_group gets the first group this machine can run: two instances on each GPU, else three CPU ones.
  TRITONSERVER_Error* err = TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
      attributes, TRITONSERVER_INSTANCEGROUPKIND_GPU, 2, nullptr, 0);
  if (err == nullptr)
    err = TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, 3, nullptr, 0);
  if (err == nullptr) err = TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(attributes, PARALLEL_LOADING != 0);
  return err;
}

struct Model { std::vector<char> weights = std::vector<char>(MODEL_BYTES); };
struct Instance { std::vector<char> scratch = std::vector<char>(INSTANCE_BYTES); };

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  std::unique_ptr<Model> state(new Model());
  Attributes usage;
  TRITONSERVER_Error* err = cpu_usage(state->weights.size(), &usage);
  TRITONSERVER_BufferAttributes* records[1] = {usage.get()};
  if (err == nullptr) err = TRITONBACKEND_ModelReportMemoryUsage(model, records, 1);
  if (err == nullptr) err = TRITONBACKEND_ModelSetState(model, state.get());
  if (err == nullptr) state.release();  // Triton holds it now; ModelFinalize deletes it
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &state);
  delete static_cast<Model*>(state);
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  const char* name = "";
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err != nullptr) return err;
  // Loaded in parallel, each instance initializes on a thread of its own; else all on the loading thread.
  log_info(std::string("backendattrs: ") + name + " initializes on thread " + std::to_string(syscall(SYS_gettid)));
  std::unique_ptr<Instance> state(new Instance());
  Attributes usage;
  err = cpu_usage(state->scratch.size(), &usage);
  TRITONSERVER_BufferAttributes* records[1] = {usage.get()};
  if (err == nullptr) err = TRITONBACKEND_ModelInstanceReportMemoryUsage(instance, records, 1);
  if (err == nullptr) err = TRITONBACKEND_ModelInstanceSetState(instance, state.get());
  if (err == nullptr) state.release();
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state);
  delete static_cast<Instance*>(state);
  return err;
}

static TRITONSERVER_Error* passthrough(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, "IN0", &input);
  const void* in = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  if (err == nullptr) err = TRITONBACKEND_InputBuffer(input, 0, &in, &size, &memory, &memory_id);
  const int64_t shape[1] = {4};
  TRITONBACKEND_Output* output = nullptr;
  if (err == nullptr && size != sizeof(int32_t) * 4)
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "backendattrs: IN0 must hold four INT32 in one buffer");
  if (err == nullptr) err = TRITONBACKEND_ResponseOutput(response, &output, "OUT0", TRITONSERVER_TYPE_INT32, shape, 1);
  void* out = nullptr;
  if (err == nullptr) err = TRITONBACKEND_OutputBuffer(output, &out, size, &memory, &memory_id);
  if (err == nullptr) std::memcpy(out, in, size);
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request** requests, const uint32_t n) {
  for (uint32_t r = 0; r < n; ++r) {
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (err == nullptr) {
      err = passthrough(requests[r], response);
      log_if_error("ResponseSend", TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
    }
    log_if_error("RequestRelease", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  }
  return nullptr;
}
"""
)

_INIT = re.compile(r"backendattrs: (\w+) initializes on thread (\d+)")


def config(name: str, backend: str) -> ModelConfig:
    """IN0 -> OUT0 (INT32 [4]) and no instance_group: the backend's preferred group decides."""
    cfg = model_config(name, backend, [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    del cfg.instance_group[:]
    return cfg


@dataclass
class Attributes:
    """What one load of a backendattrs model showed."""

    model: str
    parallel: bool  # built with PARALLEL_LOADING
    policy: str  # the execution policy the backend read back after setting it
    group: dict[str, Any]  # the instance_group in the config Triton loaded
    init_threads: dict[str, int]  # instance -> thread its TRITONBACKEND_ModelInstanceInitialize ran on
    memory_usage: list[dict[str, Any]]  # the model's statistics' memory_usage
    backend_threads: tuple[int, int] | None  # (started, shared) backend threads, from verbose lines

    @property
    def threads(self) -> int:
        return len(set(self.init_threads.values()))

    @property
    def gpus(self) -> int:
        """The GPUs a KIND_GPU group's instances are on (Triton fills in every GPU it sees); 0 for other kinds."""
        return len(self.group.get("gpus") or []) if self.group.get("kind") == "KIND_GPU" else 0

    @property
    def instances(self) -> int:
        """The instances Triton made of the group: ``count`` on each of its GPUs for KIND_GPU, else ``count``
        (core r23.12 ``src/backend_model.cc:536-566``)."""
        count = int(self.group.get("count", 0))
        return count * self.gpus if self.group.get("kind") == "KIND_GPU" else count

    @property
    def ok(self) -> bool:
        reported = MODEL_BYTES + self.instances * INSTANCE_BYTES
        return (
            self.policy == "DEVICE_BLOCKING"
            and len(self.init_threads) == self.instances
            and self.threads == (self.instances if self.parallel else 1)
            and sum(int(m["byte_size"]) for m in self.memory_usage) == reported
        )

    def __str__(self) -> str:
        kind, count = self.group.get("kind"), self.group.get("count")
        lines = [
            f"{self.model} (parallel instance loading {'on' if self.parallel else 'off'}):",
            f"  execution policy read back: {self.policy}",
            f"  instance_group Triton filled in: {kind} x {count} (named {self.group.get('name')!r})",
            f"  {len(self.init_threads)} instances initialized on {self.threads} thread(s)",
            "  memory_usage in its statistics: "
            + ", ".join(f"{m['type']} {m['id']}: {int(m['byte_size'])} bytes" for m in self.memory_usage),
        ]
        if self.backend_threads is not None:
            started, shared = self.backend_threads
            lines.append(f"  backend threads: {started} started, {shared} shared (Triton's verbose log)")
        return "\n".join(lines)


def setup(server: TritonServer) -> None:
    """Build both backends and serve their models."""
    for parallel in (True, False):
        load(server, parallel=parallel)


def load(server: TritonServer, *, parallel: bool = True) -> Attributes:
    """Build the backend (with or without parallel instance loading), load its model, and read back
    what Triton made of it: its config, its log, its statistics."""
    model, backend = (MODEL, BACKEND) if parallel else (SERIAL_MODEL, SERIAL_BACKEND)
    server.repository.write_config(config(model, backend))
    mark = server.logs.mark()
    server.cpp_backend(backend, SOURCE, [model], defines={"PARALLEL_LOADING": int(parallel)})
    infer(server, model, {"IN0": np.array([1, 2, 3, 4], np.int32)})  # it serves
    server.logs.settle()
    text = server.logs.since(mark)
    policy = re.findall(r"backendattrs: execution policy (\w+)", text)
    threads = {name: int(tid) for name, tid in _INIT.findall(text) if name.startswith(model + "_")}
    verbose = int(server.models.log_settings()["log_verbose_level"]) >= 1
    started = text.count(f"Starting backend thread for {model}_")
    shared = text.count(f"Using already started backend thread for {model}_")
    stats = server.stats(model)["model_stats"][0]
    return Attributes(
        model,
        parallel,
        policy[-1] if policy else "",
        server.model_config(model)["instance_group"][0],
        threads,
        stats.get("memory_usage", []),
        (started, shared) if verbose else None,
    )


def run(server: TritonServer) -> Outcome:
    """Preferred group, policy, memory usage, and instances initialized in parallel or one by one."""
    parallel, serial = load(server, parallel=True), load(server, parallel=False)
    return Outcome(parallel.ok and serial.ok, {"parallel_threads": parallel.threads, "serial_threads": serial.threads})
