// Copies between CPU and GPU memory (declared in labkit/tensors.hpp). Only a CUDA build (LABKIT_CUDA,
// `%%triton_cpp NAME --cuda`) links cudart; a CPU build refuses GPU memory with a clear error instead.
#include <cstring>

#include "labkit/backend.hpp"

#ifdef LABKIT_CUDA
#include <cuda_runtime_api.h>
#endif

namespace labkit {

bool cuda_build() {
#ifdef LABKIT_CUDA
  return true;
#else
  return false;
#endif
}

void copy_memory(void* dst, TRITONSERVER_MemoryType dst_memory, const void* src, TRITONSERVER_MemoryType src_memory,
                 size_t byte_size, const std::string& what) {
  if (byte_size == 0) return;
  if (dst_memory != TRITONSERVER_MEMORY_GPU && src_memory != TRITONSERVER_MEMORY_GPU) {
    std::memcpy(dst, src, byte_size);
    return;
  }
#ifdef LABKIT_CUDA
  // cudaMemcpyDefault: unified addressing tells host from device pointers (and which device).
  const cudaError_t status = cudaMemcpy(dst, src, byte_size, cudaMemcpyDefault);
  if (status != cudaSuccess) {
    throw Error(what + ": copying " + std::to_string(byte_size) + " bytes " +
                (src_memory == TRITONSERVER_MEMORY_GPU ? "from" : "to") + " the GPU failed: " +
                cudaGetErrorString(status), TRITONSERVER_ERROR_INTERNAL);
  }
#else
  throw Error(what + " is in GPU memory, and this backend was built without CUDA; build it with "
              "`%%triton_cpp NAME --cuda` (build_backend(..., cuda=True)) to read and write GPU memory",
              TRITONSERVER_ERROR_UNSUPPORTED);
#endif
}

}  // namespace labkit
