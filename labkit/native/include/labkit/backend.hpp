// labkit/backend.hpp: a small C++17 layer over Triton's backend C API, so that a backend written in
// a notebook cell stays short and still does everything a backend owes Triton.
//
//   #include "labkit/backend.hpp"
//
//   LABKIT_MODEL_STATE(labkit::ModelState)   // ModelInitialize/Finalize: read the config once
//
//   TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
//       TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
//     return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
//       labkit::Tensor x = batch.input("IN0");     // IN0 of every request, one contiguous buffer
//       batch.output("OUT0", x);                   // split back into one output per request
//     });
//   }
//
// labkit::execute owns the part that is easy to get wrong: every request gets exactly one final
// response (an error response if the code throws), a request that is malformed (input bytes that do
// not match its shape, a shape the others in the batch do not share, an output Triton cannot place)
// fails alone while the others are answered, statistics are reported, and only then are the
// requests released.
//
// This header only declares: the helpers are compiled once per toolchain (labkit/native/src, linked
// into every backend), so a cell's compile covers the cell alone. The model config is JSON
// (nlohmann::json); code that reads it directly includes "labkit/json.hpp", which costs about two
// seconds of compile time. Works with labkit's own declarations of the 23.12 C API or with
// Triton's official r23.12 headers.
#pragma once

#include "triton/core/tritonbackend.h"

// Triton finds the entry points with dlsym, so they must be in the dynamic symbol table even
// under -fvisibility=hidden. Triton's own header does not mark them on Linux; re-declaring them
// here does, for either header. A later definition also inherits C linkage from these
// declarations, so `extern "C"` on the definition is optional.
#define LABKIT_EXPORT extern "C" __attribute__((visibility("default")))
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_BackendAttribute* backend_attributes);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatcherInitialize(
    TRITONBACKEND_Batcher** batcher, TRITONBACKEND_Model* model);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatcherFinalize(TRITONBACKEND_Batcher* batcher);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatchInitialize(const TRITONBACKEND_Batcher* batcher, void** userp);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatchIncludeRequest(
    TRITONBACKEND_Request* request, void* userp, bool* should_include);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatchFinalize(void* userp);

// The helper layer's declarations, one subject per header. A backend includes this header rather than
// one of them: only this one marks the entry points above as exported.
#include "labkit/errors.hpp"
#include "labkit/model.hpp"
#include "labkit/tensors.hpp"
#include "labkit/metrics.hpp"
#include "labkit/batch.hpp"

// Run the statements and return NULL, or the exception they threw as a TRITONSERVER_Error*:
//   TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
//     LABKIT_TRY(labkit::log_info("loading " + labkit::model_name(model)));
//   }
#define LABKIT_TRY(...) return ::labkit::guard([&]() { __VA_ARGS__; })

// Throw labkit::Error if a Triton call failed.
#define LABKIT_CHECK(call) ::labkit::check(call)

// Define TRITONBACKEND_ModelInitialize/Finalize keeping one StateType per model (labkit::ModelState
// or derived from it). A StateType constructor that throws fails the model's load with its message.
#define LABKIT_MODEL_STATE(StateType)                                                           \
  TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {               \
    LABKIT_TRY(std::unique_ptr<::labkit::ModelState> state(new StateType(model));               \
               ::labkit::check(TRITONBACKEND_ModelSetState(model, state.get()));                \
               state.release());                                                                 \
  }                                                                                             \
  TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {                 \
    LABKIT_TRY(delete ::labkit::known_state(model));                                            \
  }
