// The helper layer's tensors, outputs and the end of a request's life (declared in
// labkit/tensors.hpp): everything that reads a request or writes a response.
#include <algorithm>
#include <cstring>

#include "labkit/backend.hpp"

namespace labkit {

// ---- tensors --------------------------------------------------------------------------------------------

size_t append_input(TRITONBACKEND_Request* request, const std::string& name, Tensor& out) {
  TRITONBACKEND_Input* input = nullptr;
  if (ErrorPtr err{TRITONBACKEND_RequestInput(request, name.c_str(), &input)}) {
    throw Error("request has no input '" + name + "'", TRITONSERVER_ERROR_INVALID_ARG);
  }
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  const int64_t* shape = nullptr;
  uint32_t dims = 0, buffers = 0;
  uint64_t byte_size = 0;
  check(TRITONBACKEND_InputProperties(input, nullptr, &dtype, &shape, &dims, &byte_size, &buffers));
  out.name = name;
  out.dtype = dtype;
  out.shape.assign(shape, shape + dims);
  const size_t start = out.bytes.size();
  out.bytes.resize(start + byte_size);
  size_t offset = start;
  for (uint32_t b = 0; b < buffers; ++b) {
    const void* buffer = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    check(TRITONBACKEND_InputBuffer(input, b, &buffer, &size, &memory, &memory_id));
    if (offset + size > out.bytes.size()) throw Error("input '" + name + "': buffers exceed the announced size");
    if (size > 0) copy_memory(out.bytes.data() + offset, TRITONSERVER_MEMORY_CPU, buffer, memory, size, "input '" + name + "'");
    offset += size;
  }
  return offset - start;
}

Tensor read_input(TRITONBACKEND_Request* request, const std::string& name) {
  Tensor t;
  append_input(request, name, t);
  return t;
}

std::vector<std::string> input_names(TRITONBACKEND_Request* request) {
  uint32_t count = 0;
  check(TRITONBACKEND_RequestInputCount(request, &count));
  std::vector<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    check(TRITONBACKEND_RequestInputName(request, i, &name));
    names.emplace_back(name);
  }
  return names;
}

namespace {

// What input `index` of a request holds: its name, datatype and shape.
struct InputInfo {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;
  uint32_t buffers = 0;
  TRITONBACKEND_Input* input = nullptr;
};

std::vector<InputInfo> request_inputs(TRITONBACKEND_Request* request) {
  uint32_t count = 0;
  check(TRITONBACKEND_RequestInputCount(request, &count));
  std::vector<InputInfo> inputs(count);
  for (uint32_t i = 0; i < count; ++i) {
    InputInfo& info = inputs[i];
    const char* name = nullptr;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    check(TRITONBACKEND_RequestInputByIndex(request, i, &info.input));
    check(TRITONBACKEND_InputProperties(info.input, &name, &info.dtype, &shape, &dims, &info.byte_size, &info.buffers));
    info.name = name;
    info.shape.assign(shape, shape + dims);
  }
  std::sort(inputs.begin(), inputs.end(), [](const InputInfo& a, const InputInfo& b) { return a.name < b.name; });
  return inputs;
}

// The strings in a BYTES input, or -1 if its bytes are not a sequence of length-prefixed strings.
int64_t strings_in(const InputInfo& info) {
  std::vector<char> joined;
  const char* data = nullptr;
  for (uint32_t b = 0; b < info.buffers; ++b) {
    const void* buffer = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    check(TRITONBACKEND_InputBuffer(info.input, b, &buffer, &size, &memory, &memory_id));
    if (memory == TRITONSERVER_MEMORY_GPU) {  // copied to the host to be checked (CUDA builds only)
      joined.resize(joined.size() + size);
      copy_memory(joined.data() + joined.size() - size, TRITONSERVER_MEMORY_CPU, buffer, memory, size,
                  "input '" + info.name + "'");
      data = joined.data();
    } else if (info.buffers == 1) {
      data = static_cast<const char*>(buffer);
    } else {  // a length prefix may straddle two buffers: join them first
      joined.insert(joined.end(), static_cast<const char*>(buffer), static_cast<const char*>(buffer) + size);
      data = joined.data();
    }
  }
  return count_strings(data, info.byte_size);
}

}  // namespace

std::string input_problem(TRITONBACKEND_Request* request) {
  for (const InputInfo& info : request_inputs(request)) {
    const std::string what = "input '" + info.name + "': shape " + shape_string(info.shape) + " of " +
                             dtype_string(info.dtype) + " needs ";
    const int64_t need = byte_size_of(info.dtype, info.shape);
    if (need >= 0) {
      if (static_cast<uint64_t>(need) != info.byte_size) {
        return what + std::to_string(need) + " bytes, but the request carries " + std::to_string(info.byte_size);
      }
      continue;
    }
    const int64_t strings = strings_in(info);
    if (strings == -1) {
      return what + std::to_string(element_count(info.shape)) + " strings, but its " +
             std::to_string(info.byte_size) +
             " bytes are not a sequence of length-prefixed strings (4-byte little-endian length, then the bytes)";
    }
    if (strings >= 0 && strings != element_count(info.shape)) {
      return what + std::to_string(element_count(info.shape)) + " strings, but the request's " +
             std::to_string(info.byte_size) + " bytes holds " + std::to_string(strings);
    }
  }
  return "";
}

bool output_requested(TRITONBACKEND_Request* request, const std::string& name) {
  uint32_t count = 0;
  check(TRITONBACKEND_RequestOutputCount(request, &count));
  for (uint32_t i = 0; i < count; ++i) {
    const char* requested = nullptr;
    check(TRITONBACKEND_RequestOutputName(request, i, &requested));
    if (name == requested) return true;
  }
  return false;
}

void* output_buffer(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                    const std::vector<int64_t>& shape, size_t byte_size) {
  TRITONBACKEND_Output* output = nullptr;
  check(TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), dtype, shape.data(),
                                     static_cast<uint32_t>(shape.size())));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  check(TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &memory, &memory_id));
  if (memory == TRITONSERVER_MEMORY_GPU) {
    throw Error("Triton placed output '" + name + "' in GPU memory, which the CPU cannot fill in place; "
                "use labkit::write_output (it copies) or labkit::output_buffer_in", TRITONSERVER_ERROR_UNSUPPORTED);
  }
  return buffer;
}

Buffer output_buffer_in(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                        const std::vector<int64_t>& shape, size_t byte_size, TRITONSERVER_MemoryType preferred,
                        int64_t preferred_id) {
  TRITONBACKEND_Output* output = nullptr;
  check(TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), dtype, shape.data(),
                                     static_cast<uint32_t>(shape.size())));
  void* buffer = nullptr;
  Buffer placed{nullptr, byte_size, preferred, preferred_id};
  check(TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &placed.memory, &placed.memory_id));
  placed.data = buffer;
  return placed;
}

std::vector<Buffer> input_buffers(TRITONBACKEND_Request* request, const std::string& name,
                                  TRITONSERVER_MemoryType preferred, int64_t preferred_id) {
  TRITONBACKEND_Input* input = nullptr;
  if (ErrorPtr err{TRITONBACKEND_RequestInput(request, name.c_str(), &input)}) {
    throw Error("request has no input '" + name + "'", TRITONSERVER_ERROR_INVALID_ARG);
  }
  uint32_t count = 0;
  check(TRITONBACKEND_InputProperties(input, nullptr, nullptr, nullptr, nullptr, nullptr, &count));
  std::vector<Buffer> buffers(count);
  for (uint32_t b = 0; b < count; ++b) {
    uint64_t size = 0;
    buffers[b].memory = preferred;  // in: the preference; out: where the buffer is
    buffers[b].memory_id = preferred_id;
    check(TRITONBACKEND_InputBuffer(input, b, &buffers[b].data, &size, &buffers[b].memory, &buffers[b].memory_id));
    buffers[b].byte_size = size;
  }
  return buffers;
}

void write_output(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                  const std::vector<int64_t>& shape, const void* data, size_t byte_size) {
  const Buffer placed = output_buffer_in(response, name, dtype, shape, byte_size, TRITONSERVER_MEMORY_CPU);
  if (byte_size > 0) {
    copy_memory(const_cast<void*>(placed.data), placed.memory, data, TRITONSERVER_MEMORY_CPU, byte_size,
                "output '" + name + "'");
  }
}

void write_output(TRITONBACKEND_Response* response, const Tensor& t) {
  write_output(response, t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
}

// ---- responses, statistics and release -----------------------------------------------------------------

void send(TRITONBACKEND_Response* response) {
  check(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr));
}

void send_error(TRITONBACKEND_Response* response, const std::string& message, TRITONSERVER_Error_Code code) {
  const ErrorPtr error{TRITONSERVER_ErrorNew(code, message.c_str())};  // Triton takes the response, not the error
  check(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error.get()));
}

void report_request(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, bool success,
                    const Timestamps& t) {
  check(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, success, t.exec_start, t.compute_start,
                                                    t.compute_end, t.exec_end));
}

void report_batch(TRITONBACKEND_ModelInstance* instance, uint64_t batch_size, const Timestamps& t) {
  check(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, batch_size, t.exec_start, t.compute_start,
                                                         t.compute_end, t.exec_end));
}

void release(TRITONBACKEND_Request* request) {
  check(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
}

}  // namespace labkit
