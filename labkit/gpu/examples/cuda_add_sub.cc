#include "labkit/backend.hpp"
#include "labkit/cuda.hpp"

__global__ void add_sub(const float* a, const float* b, float* sum, float* diff, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { sum[i] = a[i] + b[i]; diff[i] = a[i] - b[i]; }
}

LABKIT_MODEL_STATE(labkit::ModelState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor a = batch.input("INPUT0"), b = batch.input("INPUT1");
    const int n = static_cast<int>(a.count<float>());
    labkit::DeviceBuffer da = labkit::to_device(a), db = labkit::to_device(b);
    labkit::DeviceBuffer sum(a.byte_size()), diff(a.byte_size());
    add_sub<<<(n + 255) / 256, 256>>>(da.data<float>(), db.data<float>(), sum.data<float>(), diff.data<float>(), n);
    labkit::check_cuda(cudaGetLastError(), "launching add_sub");
    batch.output("OUTPUT0", labkit::to_host(sum, a));
    batch.output("OUTPUT1", labkit::to_host(diff, a));
  });
}
