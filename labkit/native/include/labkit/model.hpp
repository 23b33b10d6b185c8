// labkit/model.hpp (part of labkit/backend.hpp): what a backend asks about itself, its models and
// their instances, and the per-model state labkit::execute reads the config from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "labkit/errors.hpp"
#include "nlohmann/json_fwd.hpp"
#include "triton/core/tritonbackend.h"

namespace labkit {

// Complete only where "labkit/json.hpp" (or nlohmann/json.hpp) is included.
using json = nlohmann::json;

// ---- backend, model and instance accessors --------------------------------------------------------

// Refuse to run on a server whose backend API is older than the one compiled against (a backend
// built with the r23.12 headers must not load into an older Triton, and a build against a newer
// API must not load into 23.12).
void check_api_version();

std::string backend_name(TRITONBACKEND_Backend* backend);
std::string model_name(TRITONBACKEND_Model* model);
uint64_t model_version(TRITONBACKEND_Model* model);
// The model's folder in the repository, for backends that read files (weights, vocabularies).
std::string model_directory(TRITONBACKEND_Model* model);
TRITONBACKEND_Backend* model_backend(TRITONBACKEND_Model* model);
// The config Triton actually uses (config.pbtxt plus defaults), as JSON: "max_batch_size",
// "input": [{"name", "data_type": "TYPE_FP32", "dims": [...]}, ...], "output", "parameters", ...
// (include "labkit/json.hpp" to call it).
json model_config(TRITONBACKEND_Model* model);
TRITONBACKEND_Model* instance_model(TRITONBACKEND_ModelInstance* instance);
std::string instance_name(TRITONBACKEND_ModelInstance* instance);
TRITONSERVER_InstanceGroupKind instance_kind(TRITONBACKEND_ModelInstance* instance);
int32_t instance_device(TRITONBACKEND_ModelInstance* instance);

// ---- datatypes, shapes and the config's spelling of them -------------------------------------------

std::string dtype_string(TRITONSERVER_DataType dtype);
// The config says "TYPE_FP32" and "TYPE_STRING"; the API says "FP32" and "BYTES".
TRITONSERVER_DataType config_dtype(const std::string& config_type);
// The dims of a config tensor entry; Triton may write 64-bit integers as JSON strings.
std::vector<int64_t> config_dims(const json& tensor);
std::string shape_string(const std::vector<int64_t>& shape);
// Elements in a shape (1 for a scalar).
int64_t element_count(const std::vector<int64_t>& shape);

// ---- per-model state ---------------------------------------------------------------------------------

// One input or output of the model's config.
struct TensorSpec {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::string data_type;      // as the config spells it, e.g. "TYPE_FP32"
  std::vector<int64_t> dims;  // without the batch dimension; -1 for a variable size
};

// What labkit keeps per model. A backend's own model state derives from it (labkit::execute and
// model_state<S>() read it through the model's state pointer, and refuse a state of another type).
struct ModelState {
  explicit ModelState(TRITONBACKEND_Model* m);
  virtual ~ModelState();
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

  // With max_batch_size > 0 every tensor has an extra leading batch dimension not in the config.
  bool batching() const { return max_batch_size > 0; }
  // A string parameter of the config ("parameters { key: ... value: { string_value: ... } }").
  std::string parameter(const std::string& key, const std::string& fallback = "") const;

  TRITONBACKEND_Model* model;
  std::string name;
  uint64_t version;
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;

 private:
  std::shared_ptr<const json> config_;

 public:
  // The whole config as JSON (include "labkit/json.hpp" to read it).
  const json& config;
};

// The labkit::ModelState behind a model's state pointer; nullptr when the model has none. Throws a
// clear Error for a state the backend set itself (not created by LABKIT_MODEL_STATE).
ModelState* known_state(TRITONBACKEND_Model* model);

// The model's state as S (labkit::ModelState or a type derived from it).
template <class S = ModelState>
S& model_state(TRITONBACKEND_Model* model) {
  ModelState* state = known_state(model);
  if (state == nullptr) throw Error("model has no state: TRITONBACKEND_ModelInitialize did not set one");
  S* typed = dynamic_cast<S*>(state);
  if (typed == nullptr) throw Error("the model's state is not of the type asked for");
  return *typed;
}

template <class S = ModelState>
S& model_state(TRITONBACKEND_ModelInstance* instance) {
  return model_state<S>(instance_model(instance));
}

}  // namespace labkit
