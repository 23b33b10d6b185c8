// custom: the passthrough of Triton's C++ backend tutorial (INPUTTensor -> OUTPUTTensor, FP32),
// with all seven entry points written out so every step of a backend's life shows in the server
// log: the backend, each model and each model instance are initialized and finalized, and
// execute copies the input to the output for every request of a batch.
#include <memory>
#include <string>

#include "labkit/backend.hpp"

namespace {

// Shared by every model that uses this library.
struct BackendState {
  std::string name;
};

// Per model: the tensor names, taken from the config so a renamed tensor needs no rebuild.
struct CustomModelState : labkit::ModelState {
  explicit CustomModelState(TRITONBACKEND_Model* model) : labkit::ModelState(model) {
    if (inputs.size() != 1 || outputs.size() != 1) {
      throw labkit::Error("custom (model '" + name + "'): expected 1 input and 1 output, config has " +
                              std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()),
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    input_name = inputs[0].name;
    output_name = outputs[0].name;
  }
  std::string input_name;
  std::string output_name;
};

// Per instance (instance_group count 2 gives two, each executing in its own thread).
struct InstanceState {
  std::string name;
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_CPU;
  int32_t device = 0;
};

}  // namespace

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return labkit::guard([&] {
    labkit::check_api_version();
    auto state = std::make_unique<BackendState>();
    state->name = labkit::backend_name(backend);
    labkit::check(TRITONBACKEND_BackendSetState(backend, state.get()));
    BackendState* s = state.release();  // Triton holds it now; TRITONBACKEND_Finalize frees it
    labkit::log_info("custom: backend '" + s->name + "' initialized");
  });
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return labkit::guard([&] {
    void* state = nullptr;
    labkit::check(TRITONBACKEND_BackendState(backend, &state));
    delete static_cast<BackendState*>(state);
    labkit::log_info("custom: backend finalized");
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return labkit::guard([&] {
    auto state = std::make_unique<CustomModelState>(model);
    // Stored as the base type: labkit::execute reads it back as labkit::ModelState*.
    labkit::check(TRITONBACKEND_ModelSetState(model, static_cast<labkit::ModelState*>(state.get())));
    CustomModelState* s = state.release();
    labkit::log_info("custom: model '" + s->name + "' version " + std::to_string(s->version) + " initialized (" +
                     s->input_name + " -> " + s->output_name + ", max_batch_size " +
                     std::to_string(s->max_batch_size) + ")");
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return labkit::guard([&] {
    void* state = nullptr;
    labkit::check(TRITONBACKEND_ModelState(model, &state));
    std::unique_ptr<labkit::ModelState> owned(static_cast<labkit::ModelState*>(state));
    labkit::log_info("custom: model '" + owned->name + "' finalized");
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return labkit::guard([&] {
    auto state = std::make_unique<InstanceState>();
    state->name = labkit::instance_name(instance);
    state->kind = labkit::instance_kind(instance);
    state->device = labkit::instance_device(instance);
    labkit::check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
    InstanceState* s = state.release();
    labkit::log_info("custom: instance '" + s->name + "' initialized (" +
                     TRITONSERVER_InstanceGroupKindString(s->kind) + " device " + std::to_string(s->device) + ")");
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  return labkit::guard([&] {
    void* state = nullptr;
    labkit::check(TRITONBACKEND_ModelInstanceState(instance, &state));
    std::unique_ptr<InstanceState> owned(static_cast<InstanceState*>(state));
    labkit::log_info("custom: instance '" + owned->name + "' finalized");
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    auto& model = batch.model_as<CustomModelState>();
    batch.output(model.output_name, batch.input(model.input_name));
  });
}
