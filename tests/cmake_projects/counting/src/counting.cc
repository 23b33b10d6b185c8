// Copies INT32 input IN to output OUT, one response per request. Built with TRITON_ENABLE_METRICS it
// also counts requests in a counter of its own (labkit_counting_requests, labelled by model); built
// with COUNTING_BUILT_AT (the COUNTING_RESPONSE_PARAMETER option) every response carries a string
// parameter "built_at", the backend repo tag CMake was configured with.
#include <cstdint>
#include <cstring>
#include <vector>

#include "triton/core/tritonbackend.h"
#include "triton/core/tritonserver.h"

namespace {

#define CHECK(call)                           \
  do {                                        \
    TRITONSERVER_Error* failure__ = (call);   \
    if (failure__ != nullptr) return failure__; \
  } while (false)

#ifdef TRITON_ENABLE_METRICS
TRITONSERVER_MetricFamily* requests_family = nullptr;
#endif

// What one model keeps: its request counter (metrics builds only).
struct ModelState {
#ifdef TRITON_ENABLE_METRICS
  TRITONSERVER_Metric* requests = nullptr;
#endif
};

TRITONSERVER_Error*
Answer(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response)
{
  TRITONBACKEND_Input* input = nullptr;
  CHECK(TRITONBACKEND_RequestInput(request, "IN", &input));
  TRITONSERVER_DataType datatype;
  const int64_t* shape = nullptr;
  uint32_t dims = 0, buffers = 0;
  uint64_t bytes = 0;
  CHECK(TRITONBACKEND_InputProperties(input, nullptr, &datatype, &shape, &dims, &bytes, &buffers));
  TRITONBACKEND_Output* output = nullptr;
  CHECK(TRITONBACKEND_ResponseOutput(response, &output, "OUT", datatype, shape, dims));
  void* out = nullptr;
  TRITONSERVER_MemoryType out_type = TRITONSERVER_MEMORY_CPU;
  int64_t out_id = 0;
  CHECK(TRITONBACKEND_OutputBuffer(output, &out, bytes, &out_type, &out_id));
  uint64_t copied = 0;
  for (uint32_t b = 0; b < buffers; ++b) {  // the input may come in several pieces
    const void* piece = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType in_type = TRITONSERVER_MEMORY_CPU;
    int64_t in_id = 0;
    CHECK(TRITONBACKEND_InputBuffer(input, b, &piece, &size, &in_type, &in_id));
    std::memcpy(static_cast<char*>(out) + copied, piece, size);
    copied += size;
  }
#ifdef COUNTING_BUILT_AT
  CHECK(TRITONBACKEND_ResponseSetStringParameter(response, "built_at", COUNTING_BUILT_AT));
#endif
  return nullptr;
}

}  // namespace

extern "C" {

TRITONSERVER_Error*
TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend)
{
#ifdef TRITON_ENABLE_METRICS
  CHECK(TRITONSERVER_MetricFamilyNew(
      &requests_family, TRITONSERVER_METRIC_KIND_COUNTER, "labkit_counting_requests",
      "Requests the counting backend answered"));
#endif
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  auto* state = new ModelState();
#ifdef TRITON_ENABLE_METRICS
  const char* name = nullptr;
  CHECK(TRITONBACKEND_ModelName(model, &name));
  TRITONSERVER_Parameter* label = TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, name);
  const TRITONSERVER_Parameter* labels[] = {label};
  TRITONSERVER_Error* failure = TRITONSERVER_MetricNew(&state->requests, requests_family, labels, 1);
  TRITONSERVER_ParameterDelete(label);
  if (failure != nullptr) {
    delete state;
    return failure;
  }
#endif
  return TRITONBACKEND_ModelSetState(model, state);
}

TRITONSERVER_Error*
TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* state = nullptr;
  CHECK(TRITONBACKEND_ModelState(model, &state));
  auto* own = static_cast<ModelState*>(state);
#ifdef TRITON_ENABLE_METRICS
  TRITONSERVER_MetricDelete(own->requests);
#endif
  delete own;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
#ifdef TRITON_ENABLE_METRICS
  TRITONBACKEND_Model* model = nullptr;
  CHECK(TRITONBACKEND_ModelInstanceModel(instance, &model));
  void* state = nullptr;
  CHECK(TRITONBACKEND_ModelState(model, &state));
  TRITONSERVER_Metric* counter = static_cast<ModelState*>(state)->requests;
#endif
  for (uint32_t i = 0; i < request_count; ++i) {
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* failure = TRITONBACKEND_ResponseNew(&response, requests[i]);
    if (failure == nullptr) {
      failure = Answer(requests[i], response);
      TRITONSERVER_Error* sent = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
      if (failure != nullptr) TRITONSERVER_ErrorDelete(failure);
      if (sent != nullptr) TRITONSERVER_ErrorDelete(sent);
    } else {
      TRITONSERVER_ErrorDelete(failure);
    }
#ifdef TRITON_ENABLE_METRICS
    TRITONSERVER_Error* uncounted = TRITONSERVER_MetricIncrement(counter, 1);
    if (uncounted != nullptr) TRITONSERVER_ErrorDelete(uncounted);
#endif
    TRITONBACKEND_RequestRelease(requests[i], TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  return nullptr;
}

}  // extern "C"
