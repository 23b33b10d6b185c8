// labkit/cuda.hpp: device memory for a backend built with CUDA (`%%triton_cpp NAME --cuda`, which
// compiles the cell with nvcc and defines LABKIT_CUDA). Include it after labkit/backend.hpp.
//
//   labkit::Tensor a = batch.input("INPUT0");             // on the host, wherever Triton held it
//   labkit::DeviceBuffer da = labkit::to_device(a);        // cudaMalloc + cudaMemcpy
//   add<<<blocks, 256>>>(da.data<float>(), ...);
//   batch.output("OUTPUT0", labkit::to_host(dc, a));       // a host tensor shaped like `a`
#pragma once

#ifndef LABKIT_CUDA
#error "labkit/cuda.hpp needs a CUDA build: %%triton_cpp NAME --cuda (build_backend(..., cuda=True))"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "labkit/backend.hpp"

namespace labkit {

// Throw a labkit::Error (INTERNAL) naming `what` and CUDA's reason unless status is cudaSuccess.
void check_cuda(cudaError_t status, const std::string& what);

// Device memory owned for one scope (cudaMalloc, cudaFree on destruction); movable, not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t byte_size);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T>
  T* data() const { return static_cast<T*>(ptr_); }
  size_t byte_size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// A copy of t's bytes on the current device.
DeviceBuffer to_device(const Tensor& t);
// A host tensor with like's name, dtype, shape and requests, holding device's bytes (it must hold
// like.byte_size() bytes): ready for batch.output().
Tensor to_host(const DeviceBuffer& device, const Tensor& like);

}  // namespace labkit
