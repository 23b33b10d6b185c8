// minimal: the smallest useful Triton backend. Copies input IN0 to output OUT0 and logs how many
// requests Triton put into each execution, so dynamic batching can be watched in the server log.
#include <string>

#include "labkit/backend.hpp"

// Parse the model's config once at load: labkit::execute needs to know whether the model batches.
LABKIT_MODEL_STATE(labkit::ModelState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::log_info("model " + batch.model().name + ": requests in batch " + std::to_string(batch.size()));
    labkit::Tensor in = batch.input("IN0");
    // (edit here: change `in` before it is sent back)
    batch.output("OUT0", in);
  });
}
