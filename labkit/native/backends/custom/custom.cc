// custom: the passthrough from Triton's backend tutorial, with all seven entry points written out,
// so each step of a backend's life can be seen in the server's log: backend, model and instance
// each get initialized and finalized, and execute copies INPUTTensor to OUTPUTTensor.
#include <string>

#include "labkit/backend.hpp"

namespace {

struct BackendState {
  std::string name;
};

struct CustomModelState : labkit::ModelState {
  using labkit::ModelState::ModelState;
};

struct InstanceState {
  std::string name;
  int32_t device_id = 0;
};

}  // namespace

extern "C" {

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return labkit::guard([&] {
    labkit::check_api_version();
    const char* name = nullptr;
    labkit::check(TRITONBACKEND_BackendName(backend, &name));
    labkit::check(TRITONBACKEND_BackendSetState(backend, new BackendState{name}));
    labkit::log_info(std::string("custom: backend '") + name + "' initialized");
  });
}

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return labkit::guard([&] {
    void* state = nullptr;
    labkit::check(TRITONBACKEND_BackendState(backend, &state));
    delete static_cast<BackendState*>(state);
    labkit::log_info("custom: backend finalized");
  });
}

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return labkit::guard([&] {
    auto* state = new CustomModelState(model);
    labkit::check(TRITONBACKEND_ModelSetState(model, static_cast<labkit::ModelState*>(state)));
    labkit::log_info("custom: model '" + state->name + "' version " + std::to_string(state->version) +
                     " initialized, max_batch_size " + std::to_string(state->max_batch_size));
  });
}

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return labkit::guard([&] {
    void* state = nullptr;
    labkit::check(TRITONBACKEND_ModelState(model, &state));
    auto* model_state = static_cast<CustomModelState*>(static_cast<labkit::ModelState*>(state));
    labkit::log_info("custom: model '" + model_state->name + "' finalized");
    delete model_state;
  });
}

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return labkit::guard([&] {
    auto* state = new InstanceState;
    const char* name = nullptr;
    labkit::check(TRITONBACKEND_ModelInstanceName(instance, &name));
    labkit::check(TRITONBACKEND_ModelInstanceDeviceId(instance, &state->device_id));
    state->name = name;
    labkit::check(TRITONBACKEND_ModelInstanceSetState(instance, state));
    labkit::log_info("custom: instance '" + state->name + "' initialized");
  });
}

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  return labkit::guard([&] {
    void* state = nullptr;
    labkit::check(TRITONBACKEND_ModelInstanceState(instance, &state));
    auto* instance_state = static_cast<InstanceState*>(state);
    labkit::log_info("custom: instance '" + instance_state->name + "' finalized");
    delete instance_state;
  });
}

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    batch.output("OUTPUTTensor", batch.input("INPUTTensor"));
  });
}

}  // extern "C"
