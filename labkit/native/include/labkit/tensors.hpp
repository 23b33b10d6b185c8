// labkit/tensors.hpp (part of labkit/backend.hpp): reading a request's inputs, writing a response's
// outputs, and the calls that end a request's life, one request at a time. labkit::Batch builds on
// them for a whole execution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "labkit/model.hpp"
#include "triton/core/tritonbackend.h"

namespace labkit {

// ---- tensors --------------------------------------------------------------------------------------------

// A tensor copied into contiguous CPU memory: the simplest thing to compute on.
struct Tensor {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
  // Set by Batch::input: which requests' data it holds (their indices in the batch) and how many
  // bytes each contributed, so output() can split it back even for BYTES, whose elements vary in size.
  std::vector<uint32_t> requests;
  std::vector<size_t> request_bytes;

  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <class T>
  size_t count() const { return bytes.size() / sizeof(T); }
  size_t byte_size() const { return bytes.size(); }
  // Elements according to the shape (for BYTES, the number of strings).
  int64_t element_count() const { return labkit::element_count(shape); }
};

// Append input `name` of one request to out.bytes, joining its buffers, and set out's name,
// dtype and shape. Returns the number of bytes appended.
size_t append_input(TRITONBACKEND_Request* request, const std::string& name, Tensor& out);
// One request's input `name`, contiguous (e.g. for a ragged batch, one request at a time).
Tensor read_input(TRITONBACKEND_Request* request, const std::string& name);
std::vector<std::string> input_names(TRITONBACKEND_Request* request);
// What is wrong with the request's inputs: bytes that do not match shape x datatype (BYTES: length
// prefixes that do not add up to the shape's element count). Empty when they are sound.
std::string input_problem(TRITONBACKEND_Request* request);
// Bytes a tensor of that datatype and shape needs; -1 for BYTES (each element has its own length).
int64_t byte_size_of(TRITONSERVER_DataType dtype, const std::vector<int64_t>& shape);
// The number of length-prefixed strings in data, or -1 if the prefixes do not end exactly at the end.
int64_t count_strings(const char* data, size_t byte_size);

// ---- memory: where Triton keeps a buffer (CPU, pinned CPU or GPU) -----------------------------------------

// One buffer as Triton holds it, not copied: a GPU one is a device pointer on device `memory_id`.
struct Buffer {
  const void* data = nullptr;
  size_t byte_size = 0;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
};
// The buffers of one request's input `name`, asking Triton for `preferred` memory (it may answer
// with another kind: check each Buffer's `memory`). For a backend that computes on the device itself.
std::vector<Buffer> input_buffers(TRITONBACKEND_Request* request, const std::string& name,
                                  TRITONSERVER_MemoryType preferred = TRITONSERVER_MEMORY_CPU, int64_t preferred_id = 0);
// Add output `name` and return its buffer where Triton placed it, having asked for `preferred` memory
// (a client's CUDA shared-memory region places it on the GPU whatever the backend asks).
Buffer output_buffer_in(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                        const std::vector<int64_t>& shape, size_t byte_size,
                        TRITONSERVER_MemoryType preferred, int64_t preferred_id = 0);
// Copy byte_size bytes between any two kinds of memory. GPU memory needs a backend built with CUDA
// (`%%triton_cpp NAME --cuda`, which defines LABKIT_CUDA): cudaMemcpy; otherwise a GPU side throws
// an UNSUPPORTED labkit::Error saying so. `what` names the tensor in that error.
void copy_memory(void* dst, TRITONSERVER_MemoryType dst_memory, const void* src, TRITONSERVER_MemoryType src_memory,
                 size_t byte_size, const std::string& what);
// Whether this backend was built with CUDA (LABKIT_CUDA).
bool cuda_build();

// A client may ask for a subset of the outputs; an output it did not ask for must not be added.
bool output_requested(TRITONBACKEND_Request* request, const std::string& name);
// Add output `name` to a response and return byte_size bytes of CPU memory to fill in place (an output
// Triton places on the GPU throws UNSUPPORTED here: use write_output, which copies, or output_buffer_in).
void* output_buffer(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                    const std::vector<int64_t>& shape, size_t byte_size);
// Add output `name` to a response with a copy of byte_size bytes of CPU data (to wherever Triton places it).
void write_output(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                  const std::vector<int64_t>& shape, const void* data, size_t byte_size);
void write_output(TRITONBACKEND_Response* response, const Tensor& t);

// ---- responses, statistics and release: the end of every request's life ---------------------------

// Send a response as the final one for its request. Triton owns it afterwards.
void send(TRITONBACKEND_Response* response);
// Send a response that tells the client what went wrong instead of carrying outputs.
void send_error(TRITONBACKEND_Response* response, const std::string& message,
                TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL);

// The four moments Triton's statistics are built from: exec_start .. compute_start is
// compute_input, compute_start .. compute_end is compute_infer, the rest is compute_output.
struct Timestamps {
  uint64_t exec_start = 0;
  uint64_t compute_start = 0;
  uint64_t compute_end = 0;
  uint64_t exec_end = 0;
};

// Must come before release: a released request can no longer be reported.
void report_request(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, bool success,
                    const Timestamps& t);
// Once per execution; batch_size is the number of inferences executed (sum of the requests' batch sizes).
void report_batch(TRITONBACKEND_ModelInstance* instance, uint64_t batch_size, const Timestamps& t);
void release(TRITONBACKEND_Request* request);

}  // namespace labkit
