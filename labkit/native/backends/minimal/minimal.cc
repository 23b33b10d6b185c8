// minimal: the smallest useful Triton backend. Copies input IN0 to output OUT0 and logs how many
// requests Triton put in each execution, so dynamic batching can be seen in the server's log.
#include <string>

#include "labkit/backend.hpp"

LABKIT_MODEL_STATE(labkit::ModelState)

extern "C" TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::log_info("model " + batch.model().name + ": requests in batch " + std::to_string(batch.size()));
    labkit::Tensor in = batch.input("IN0");
    // (edit here: change `in` before it is sent back)
    batch.output("OUT0", in);
  });
}
