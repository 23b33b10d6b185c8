// recommended: a passthrough for any datatype and any shape, written the careful way. It checks
// the API version when Triton loads it, checks each model's config when the model loads (one
// input, one output, same datatype, same dims) with messages that say what to fix, reports
// statistics, and keeps a metric of its own on /metrics: bytes passed through, per model.
#include <memory>
#include <string>

#include "labkit/backend.hpp"

namespace {

// One per loaded library. The metric family lives here, not in a global, so that it is deleted
// in TRITONBACKEND_Finalize while Triton's metrics registry still exists.
struct BackendState {
  std::unique_ptr<labkit::MetricFamily> bytes;
};

struct RecommendedState : labkit::ModelState {
  explicit RecommendedState(TRITONBACKEND_Model* model) : labkit::ModelState(model) {
    if (inputs.size() != 1) invalid("expected exactly 1 input, config has " + std::to_string(inputs.size()));
    if (outputs.size() != 1) invalid("expected exactly 1 output, config has " + std::to_string(outputs.size()));
    const labkit::TensorSpec& in = inputs[0];
    const labkit::TensorSpec& out = outputs[0];
    input_name = in.name;
    output_name = out.name;
    if (in.data_type != out.data_type) {
      invalid("input '" + input_name + "' is " + in.data_type + " but output '" + output_name + "' is " +
              out.data_type + "; a passthrough needs the same datatype");
    }
    if (in.dims != out.dims) {
      invalid("input '" + input_name + "' has dims " + labkit::shape_string(in.dims) + " but output '" +
              output_name + "' has dims " + labkit::shape_string(out.dims) + "; a passthrough needs the same dims");
    }

    void* backend_state = nullptr;
    labkit::check(TRITONBACKEND_BackendState(labkit::model_backend(model), &backend_state));
    auto* backend = static_cast<BackendState*>(backend_state);
    if (backend != nullptr && backend->bytes) {
      bytes = std::make_unique<labkit::Metric>(
          *backend->bytes, std::vector<std::pair<std::string, std::string>>{{"model", name},
                                                                            {"version", std::to_string(version)}});
    }
    labkit::log_info("recommended: model '" + name + "' passes " + input_name + " " + in.data_type + " " +
                     labkit::shape_string(in.dims) + " through to " + output_name);
  }

  [[noreturn]] void invalid(const std::string& what) const {
    throw labkit::Error("recommended (model '" + name + "'): " + what, TRITONSERVER_ERROR_INVALID_ARG);
  }

  std::string input_name;
  std::string output_name;
  std::unique_ptr<labkit::Metric> bytes;  // freed with the model, before Finalize frees the family
};

}  // namespace

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return labkit::guard([&] {
    labkit::check_api_version();
    auto state = std::make_unique<BackendState>();
    try {
      state->bytes = std::make_unique<labkit::MetricFamily>(
          "labkit_recommended_bytes_total", "Bytes the recommended backend passed from input to output");
    } catch (const labkit::Error& e) {  // a metric is a nicety: serve without it
      labkit::log_warn(std::string("recommended: no bytes metric: ") + e.what());
    }
    labkit::check(TRITONBACKEND_BackendSetState(backend, state.get()));
    state.release();  // Triton holds it now; TRITONBACKEND_Finalize frees it
  });
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return labkit::guard([&] {
    void* state = nullptr;
    labkit::check(TRITONBACKEND_BackendState(backend, &state));
    delete static_cast<BackendState*>(state);
  });
}

LABKIT_MODEL_STATE(RecommendedState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    auto& model = batch.model_as<RecommendedState>();
    labkit::log(TRITONSERVER_LOG_VERBOSE, "model " + model.name + ": requests in batch " + std::to_string(batch.size()));
    labkit::Tensor tensor = batch.input(model.input_name);
    if (model.bytes) model.bytes->increment(static_cast<double>(tensor.byte_size()));
    batch.output(model.output_name, tensor);
  });
}
