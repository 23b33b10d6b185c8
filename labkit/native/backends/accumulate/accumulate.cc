// accumulate: a stateful backend whose running sum lives in Triton, not here. The model's config
// declares implicit state (sequence_batching.state): every request arrives with input SUM_IN, the
// sum of its sequence so far (zeros on the first request: initial_state), and the backend hands back
// the new sum as state SUM_OUT through TRITONBACKEND_StateNew / StateBuffer / StateUpdate. Triton
// gives that to the sequence's next request, whichever batch slot and instance serve it, so the
// backend holds no per-sequence table and nothing to clean up when a sequence ends or idles out.
#include <cstring>
#include <vector>

#include "labkit/backend.hpp"

LABKIT_MODEL_STATE(labkit::ModelState)

namespace {

// Hand one request's new sum to Triton as the state its sequence carries to the next request.
void update_state(TRITONBACKEND_Request* request, int32_t sum) {
  const int64_t shape[] = {1, 1};  // one batch row of dims [1], as the config's state declares
  TRITONBACKEND_State* state = nullptr;
  LABKIT_CHECK(TRITONBACKEND_StateNew(&state, request, "SUM_OUT", TRITONSERVER_TYPE_INT32, shape, 2));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  // The state, and its buffer, belong to the request: nothing here to free.
  LABKIT_CHECK(TRITONBACKEND_StateBuffer(state, &buffer, sizeof(sum), &memory_type, &memory_type_id));
  if (memory_type == TRITONSERVER_MEMORY_GPU) throw labkit::Error("SUM_OUT state was placed in GPU memory; this backend writes CPU memory only");
  std::memcpy(buffer, &sum, sizeof(sum));
  LABKIT_CHECK(TRITONBACKEND_StateUpdate(state));
}

}  // namespace

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor x = batch.input("INPUT");
    labkit::Tensor sum = batch.input("SUM_IN");  // row k: the sum so far of request k's sequence
    // A sequence sends one value per request; rows would not line up with requests otherwise.
    if (sum.count<int32_t>() != sum.requests.size()) throw labkit::Error("each request of a sequence carries one row");
    for (size_t k = 0; k < sum.count<int32_t>(); ++k) sum.data<int32_t>()[k] += x.data<int32_t>()[k];
    // One row per request (a sequence sends one value at a time), in the order of sum.requests.
    for (size_t k = 0; k < sum.requests.size(); ++k) update_state(batch.request(sum.requests[k]), sum.data<int32_t>()[k]);
    sum.name = "OUTPUT";
    batch.output("OUTPUT", sum);
  });
}
