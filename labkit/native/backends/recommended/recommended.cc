// recommended: a passthrough for any datatype and any shape, written the careful way: it checks its
// config when the model loads (one input, one output, same datatype and dims), reports statistics,
// and keeps a metric of its own on /metrics (bytes passed through, per model).
#include <memory>
#include <string>

#include "labkit/backend.hpp"

namespace {

// One metric family for the backend, created when Triton loads it.
TRITONSERVER_MetricFamily* g_bytes_family = nullptr;

struct RecommendedState : labkit::ModelState {
  explicit RecommendedState(TRITONBACKEND_Model* model) : labkit::ModelState(model) {
    const labkit::json inputs = config.value("input", labkit::json::array());
    const labkit::json outputs = config.value("output", labkit::json::array());
    if (inputs.size() != 1) {
      throw labkit::Error("recommended: model '" + name + "' must have exactly 1 input, its config has " +
                              std::to_string(inputs.size()),
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    if (outputs.size() != 1) {
      throw labkit::Error("recommended: model '" + name + "' must have exactly 1 output, its config has " +
                              std::to_string(outputs.size()),
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    const labkit::json& in = inputs[0];
    const labkit::json& out = outputs[0];
    if (in.value("data_type", "") != out.value("data_type", "")) {
      throw labkit::Error("recommended: input '" + in.value("name", "") + "' is " + in.value("data_type", "") +
                              " but output '" + out.value("name", "") + "' is " + out.value("data_type", "") +
                              "; a passthrough needs the same datatype",
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    if (in.value("dims", labkit::json::array()) != out.value("dims", labkit::json::array())) {
      throw labkit::Error("recommended: input dims " + in.value("dims", labkit::json::array()).dump() +
                              " differ from output dims " + out.value("dims", labkit::json::array()).dump() +
                              "; a passthrough needs the same dims",
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    input_name = in.value("name", "");
    output_name = out.value("name", "");
    if (g_bytes_family != nullptr) {
      TRITONSERVER_Parameter* label = TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, name.c_str());
      const TRITONSERVER_Parameter* labels[] = {label};
      TRITONSERVER_Error* err = TRITONSERVER_MetricNew(&bytes_metric, g_bytes_family, labels, 1);
      TRITONSERVER_ParameterDelete(label);
      if (err != nullptr) {  // a metric is a nicety: the model serves without it
        labkit::log_warn(std::string("recommended: no bytes metric: ") + TRITONSERVER_ErrorMessage(err));
        TRITONSERVER_ErrorDelete(err);
        bytes_metric = nullptr;
      }
    }
    labkit::log_info("recommended: model '" + name + "' passes " + input_name + " through to " + output_name);
  }

  ~RecommendedState() override {
    if (bytes_metric != nullptr) TRITONSERVER_MetricDelete(bytes_metric);
  }

  std::string input_name;
  std::string output_name;
  TRITONSERVER_Metric* bytes_metric = nullptr;
};

}  // namespace

extern "C" {

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend*) {
  return labkit::guard([] {
    labkit::check_api_version();
    TRITONSERVER_Error* err = TRITONSERVER_MetricFamilyNew(
        &g_bytes_family, TRITONSERVER_METRIC_KIND_COUNTER, "labkit_recommended_bytes_total",
        "Bytes the recommended backend passed from input to output");
    if (err != nullptr) {
      labkit::log_warn(std::string("recommended: no metric family: ") + TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
      g_bytes_family = nullptr;
    }
  });
}

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  return labkit::guard([] {
    if (g_bytes_family != nullptr) labkit::check(TRITONSERVER_MetricFamilyDelete(g_bytes_family));
    g_bytes_family = nullptr;
  });
}

}  // extern "C"

LABKIT_MODEL_STATE(RecommendedState)

extern "C" TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    auto& state = batch.model_as<RecommendedState>();
    labkit::Tensor tensor = batch.input(state.input_name);
    batch.output(state.output_name, tensor);
    if (state.bytes_metric != nullptr) {
      TRITONSERVER_Error* err = TRITONSERVER_MetricIncrement(state.bytes_metric, static_cast<double>(tensor.bytes.size()));
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    }
  });
}
