// Device memory helpers (declared in labkit/cuda.hpp); compiled only into CUDA builds.
#ifdef LABKIT_CUDA
#include "labkit/cuda.hpp"

#include <utility>

namespace labkit {

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw Error(what + " failed: " + cudaGetErrorString(status), TRITONSERVER_ERROR_INTERNAL);
  }
}

DeviceBuffer::DeviceBuffer(size_t byte_size) : size_(byte_size) {
  if (byte_size > 0) check_cuda(cudaMalloc(&ptr_, byte_size), "cudaMalloc of " + std::to_string(byte_size) + " bytes");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);  // a destructor cannot report; the driver reclaims it at exit anyway
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer to_device(const Tensor& t) {
  DeviceBuffer device(t.byte_size());
  if (t.byte_size() > 0) {
    check_cuda(cudaMemcpy(device.data<void>(), t.bytes.data(), t.byte_size(), cudaMemcpyHostToDevice),
               "copying '" + t.name + "' to the GPU");
  }
  return device;
}

Tensor to_host(const DeviceBuffer& device, const Tensor& like) {
  if (device.byte_size() != like.byte_size()) {
    throw Error("to_host: the device buffer holds " + std::to_string(device.byte_size()) + " bytes, '" + like.name +
                "' needs " + std::to_string(like.byte_size()));
  }
  Tensor out = like;
  if (out.byte_size() > 0) {
    check_cuda(cudaMemcpy(out.bytes.data(), device.data<void>(), out.byte_size(), cudaMemcpyDeviceToHost),
               "copying '" + like.name + "' from the GPU");
  }
  return out;
}

}  // namespace labkit
#endif  // LABKIT_CUDA
