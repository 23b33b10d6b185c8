#include <memory>
#include <string>

#include "labkit/backend.hpp"
#include "labkit/cuda.hpp"

__global__ void add_sub(const float* a, const float* b, float* sum, float* diff, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { sum[i] = a[i] + b[i]; diff[i] = a[i] - b[i]; }
}

LABKIT_MODEL_STATE(labkit::ModelState)

// What Triton tells each instance at load: its kind and the GPU it belongs to. Triton makes `count`
// instances for every GPU listed in `gpus` and runs each instance's executes on a thread of its own.
struct InstanceState {
  std::string name;
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_AUTO;
  int32_t device_id = -1;
};

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return labkit::guard([&] {
    auto state = std::make_unique<InstanceState>();  // freed here unless Triton takes it below
    const char* name = nullptr;
    LABKIT_CHECK(TRITONBACKEND_ModelInstanceName(instance, &name));
    LABKIT_CHECK(TRITONBACKEND_ModelInstanceKind(instance, &state->kind));
    LABKIT_CHECK(TRITONBACKEND_ModelInstanceDeviceId(instance, &state->device_id));
    state->name = name;
    if (state->kind != TRITONSERVER_INSTANCEGROUPKIND_GPU) {  // the load fails with this message
      throw labkit::Error("instance " + state->name + " is KIND_" + TRITONSERVER_InstanceGroupKindString(state->kind) +
                          ": this backend runs a CUDA kernel on its instance's GPU; give the model "
                          "instance_group [{ kind: KIND_GPU, count: 1, gpus: [0] }]",
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    const std::string device = std::to_string(state->device_id);
    labkit::check_cuda(cudaSetDevice(state->device_id), "cudaSetDevice(" + device + ") for instance " + state->name);
    labkit::log_info("instance " + state->name + ": KIND_GPU on device " + device);
    LABKIT_CHECK(TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
    state.release();  // Triton holds it until TRITONBACKEND_ModelInstanceFinalize
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  return labkit::guard([&] {
    void* state = nullptr;
    LABKIT_CHECK(TRITONBACKEND_ModelInstanceState(instance, &state));
    std::unique_ptr<InstanceState> mine(static_cast<InstanceState*>(state));  // null if Initialize failed
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != nullptr) return err;  // nothing taken yet: Triton answers the requests with this error
  const InstanceState& mine = *static_cast<const InstanceState*>(state);
  return labkit::execute(instance, requests, count, [&mine](labkit::Batch& batch) {
    // The current device belongs to the calling thread: make it this instance's GPU before allocating.
    labkit::check_cuda(cudaSetDevice(mine.device_id), "cudaSetDevice(" + std::to_string(mine.device_id) + ")");
    labkit::Tensor a = batch.input("INPUT0"), b = batch.input("INPUT1");
    const int n = static_cast<int>(a.count<float>());
    labkit::DeviceBuffer da = labkit::to_device(a), db = labkit::to_device(b);  // cudaFree when they go
    labkit::DeviceBuffer sum(a.byte_size()), diff(a.byte_size());
    add_sub<<<(n + 255) / 256, 256>>>(da.data<float>(), db.data<float>(), sum.data<float>(), diff.data<float>(), n);
    labkit::check_cuda(cudaGetLastError(), "launching add_sub");
    batch.output("OUTPUT0", labkit::to_host(sum, a));
    batch.output("OUTPUT1", labkit::to_host(diff, a));
  });
}
