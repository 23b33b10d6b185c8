// labkit/backend.hpp: a small helper layer so a Triton backend written in a notebook cell stays short.
//
//   #include "labkit/backend.hpp"
//   LABKIT_MODEL_STATE(labkit::ModelState)        // ModelInitialize/Finalize keeping the config
//   extern "C" TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
//       TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
//     return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
//       batch.output("OUT0", batch.input("IN0"));   // gather over the batch, scatter back per request
//     });
//   }
//
// labkit::execute owns the request lifecycle: responses are created, C++ exceptions become error
// responses, statistics are reported (per request and per batch) and only then are requests released.
// Header-only, C++17; needs nlohmann/json.hpp (PyPI package nlohmann-json) on the include path.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "triton/core/tritonbackend.h"

namespace labkit {

using json = nlohmann::json;

// ---- errors ------------------------------------------------------------------------------------

// A C++ exception that carries a Triton error code to the server.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL)
      : std::runtime_error(message), code(code) {}
  TRITONSERVER_Error_Code code;
};

// Throw the server's error as labkit::Error (taking ownership of it); nullptr means success.
inline void check(TRITONSERVER_Error* err) {
  if (err == nullptr) return;
  std::string message = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_Error_Code code = TRITONSERVER_ErrorCode(err);
  TRITONSERVER_ErrorDelete(err);
  throw Error(message, code);
}

// Run f and turn any C++ exception into a TRITONSERVER_Error*: entry points must not throw across the C ABI.
template <class F>
TRITONSERVER_Error* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const Error& e) {
    return TRITONSERVER_ErrorNew(e.code, e.what());
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "unknown C++ exception");
  }
}

// Nanoseconds of a steady clock, the timestamps Triton's statistics expect.
inline uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- logging (Triton's log, so lines land beside the server's own) ----------------------------

inline void log(TRITONSERVER_LogLevel level, const std::string& message, const char* file = __builtin_FILE(),
                int line = __builtin_LINE()) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, file, line, message.c_str());
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);  // logging must never fail a request
}
inline void log_info(const std::string& m, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  log(TRITONSERVER_LOG_INFO, m, file, line);
}
inline void log_warn(const std::string& m, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  log(TRITONSERVER_LOG_WARN, m, file, line);
}
inline void log_error(const std::string& m, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  log(TRITONSERVER_LOG_ERROR, m, file, line);
}

// ---- models --------------------------------------------------------------------------------------

inline std::string model_name(TRITONBACKEND_Model* model) {
  const char* name = nullptr;
  check(TRITONBACKEND_ModelName(model, &name));
  return name;
}

inline uint64_t model_version(TRITONBACKEND_Model* model) {
  uint64_t version = 0;
  check(TRITONBACKEND_ModelVersion(model, &version));
  return version;
}

// The model's folder in the repository (where its version folders and artifacts are).
inline std::string model_directory(TRITONBACKEND_Model* model) {
  TRITONBACKEND_ArtifactType type;
  const char* location = nullptr;
  check(TRITONBACKEND_ModelRepository(model, &type, &location));
  return location;
}

// The model's config.pbtxt, as Triton holds it, in JSON form.
inline json model_config(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* message = nullptr;
  check(TRITONBACKEND_ModelConfig(model, 1 /* config version */, &message));
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  json config = err == nullptr ? json::parse(base, base + size) : json();
  TRITONSERVER_MessageDelete(message);
  check(err);
  return config;
}

inline TRITONBACKEND_Model* instance_model(TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = nullptr;
  check(TRITONBACKEND_ModelInstanceModel(instance, &model));
  return model;
}

// What labkit keeps per model; a backend's own model state derives from it.
struct ModelState {
  explicit ModelState(TRITONBACKEND_Model* m)
      : model(m), name(model_name(m)), version(model_version(m)), config(model_config(m)) {
    max_batch_size = config.value("max_batch_size", 0);
  }
  virtual ~ModelState() = default;
  bool batching() const { return max_batch_size > 0; }

  TRITONBACKEND_Model* model;
  std::string name;
  uint64_t version;
  json config;
  int max_batch_size = 0;
};

template <class S = ModelState>
S& model_state(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  check(TRITONBACKEND_ModelState(model, &state));
  if (state == nullptr) {
    throw Error("model has no labkit state: add LABKIT_MODEL_STATE(labkit::ModelState) to the backend, "
                "or set a state derived from labkit::ModelState in TRITONBACKEND_ModelInitialize");
  }
  return *static_cast<S*>(static_cast<ModelState*>(state));
}

template <class S = ModelState>
S& model_state(TRITONBACKEND_ModelInstance* instance) {
  return model_state<S>(instance_model(instance));
}

// Refuse to run on a server whose backend API is older than the one compiled against.
inline void check_api_version() {
  uint32_t major = 0, minor = 0;
  check(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
    throw Error("backend built for Triton backend API " + std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
                    std::to_string(TRITONBACKEND_API_VERSION_MINOR) + ", server has " + std::to_string(major) +
                    "." + std::to_string(minor),
                TRITONSERVER_ERROR_UNSUPPORTED);
  }
}

// ---- tensors -------------------------------------------------------------------------------------

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline std::string dtype_string(TRITONSERVER_DataType dtype) { return TRITONSERVER_DataTypeString(dtype); }

// A tensor held contiguously in CPU memory.
struct Tensor {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<char> bytes;

  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <class T>
  size_t count() const { return bytes.size() / sizeof(T); }
};

// Append one request input's bytes (gathering its buffers) to out; returns its properties.
inline void append_input(TRITONBACKEND_Request* request, const std::string& name, Tensor& out) {
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, name.c_str(), &input);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    throw Error("request has no input '" + name + "'", TRITONSERVER_ERROR_INVALID_ARG);
  }
  TRITONSERVER_DataType dtype;
  const int64_t* shape = nullptr;
  uint32_t dims = 0, buffers = 0;
  uint64_t byte_size = 0;
  check(TRITONBACKEND_InputProperties(input, nullptr, &dtype, &shape, &dims, &byte_size, &buffers));
  out.name = name;
  out.dtype = dtype;
  out.shape.assign(shape, shape + dims);
  size_t offset = out.bytes.size();
  out.bytes.resize(offset + byte_size);
  for (uint32_t b = 0; b < buffers; ++b) {
    const void* buffer = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    check(TRITONBACKEND_InputBuffer(input, b, &buffer, &size, &memory, &memory_id));
    if (memory == TRITONSERVER_MEMORY_GPU) throw Error("input '" + name + "' is in GPU memory; labkit's helpers read CPU memory");
    std::memcpy(out.bytes.data() + offset, buffer, size);
    offset += size;
  }
}

// One request's input, contiguous.
inline Tensor read_input(TRITONBACKEND_Request* request, const std::string& name) {
  Tensor t;
  append_input(request, name, t);
  return t;
}

// Whether the client asked for this output (Triton lists every output when the client named none).
inline bool output_requested(TRITONBACKEND_Request* request, const std::string& name) {
  uint32_t count = 0;
  check(TRITONBACKEND_RequestOutputCount(request, &count));
  for (uint32_t i = 0; i < count; ++i) {
    const char* requested = nullptr;
    check(TRITONBACKEND_RequestOutputName(request, i, &requested));
    if (name == requested) return true;
  }
  return false;
}

// Add an output to a response and copy byte_size bytes of data into it.
inline void write_output(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                         const std::vector<int64_t>& shape, const void* data, size_t byte_size) {
  TRITONBACKEND_Output* output = nullptr;
  check(TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), dtype, shape.data(),
                                     static_cast<uint32_t>(shape.size())));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  check(TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &memory, &memory_id));
  if (memory == TRITONSERVER_MEMORY_GPU) throw Error("Triton placed output '" + name + "' in GPU memory");
  if (byte_size > 0) std::memcpy(buffer, data, byte_size);
}

// ---- one execution: a batch of requests ----------------------------------------------------------

class Batch {
 public:
  Batch(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, uint32_t count)
      : instance_(instance), requests_(requests, requests + count), model_(&model_state<>(instance)) {
    responses_.resize(count, nullptr);
    errors_.resize(count);
    rows_.resize(count, 1);
    for (uint32_t i = 0; i < count; ++i) {
      TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&responses_[i], requests_[i]);
      if (err != nullptr) {
        errors_[i] = TRITONSERVER_ErrorMessage(err);
        TRITONSERVER_ErrorDelete(err);
        continue;
      }
      if (model_->batching()) rows_[i] = first_dim(requests_[i]);
    }
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  const ModelState& model() const { return *model_; }
  template <class S>
  S& model_as() { return *static_cast<S*>(model_); }
  TRITONBACKEND_ModelInstance* instance() const { return instance_; }
  // Number of requests in this execution.
  uint32_t size() const { return static_cast<uint32_t>(requests_.size()); }
  TRITONBACKEND_Request* request(uint32_t i) const { return requests_.at(i); }
  TRITONBACKEND_Response* response(uint32_t i) const { return responses_.at(i); }
  // Batch-dimension size of request i (1 for a model without batching).
  int64_t rows(uint32_t i) const { return rows_.at(i); }
  // Inferences in this execution: the batch size Triton's statistics count.
  uint64_t total_rows() const {
    uint64_t n = 0;
    for (int64_t r : rows_) n += static_cast<uint64_t>(r);
    return n;
  }

  // Input `name` of every request, concatenated along the batch dimension (for a model without
  // batching, concatenated whole). The shape's first dimension is the total.
  Tensor input(const std::string& name) const {
    Tensor all;
    std::vector<int64_t> row_shape;
    for (uint32_t i = 0; i < size(); ++i) {
      Tensor one;
      append_input(requests_[i], name, one);
      std::vector<int64_t> rs = row_shape_of(one.shape);
      if (i == 0) {
        all.name = one.name;
        all.dtype = one.dtype;
        row_shape = rs;
      } else if (one.dtype != all.dtype || rs != row_shape) {
        throw Error("input '" + name + "' differs between the requests of one batch (" + dtype_string(one.dtype) +
                        " " + shape_string(one.shape) + ")",
                    TRITONSERVER_ERROR_INVALID_ARG);
      }
      all.bytes.insert(all.bytes.end(), one.bytes.begin(), one.bytes.end());
    }
    all.shape = row_shape;
    if (model_->batching()) all.shape.insert(all.shape.begin(), static_cast<int64_t>(total_rows()));
    else if (size() > 1) all.shape.insert(all.shape.begin(), static_cast<int64_t>(size()));
    return all;
  }

  // Split `data` (total_rows() rows of row_shape) back into one output per request.
  void output(const std::string& name, TRITONSERVER_DataType dtype, const std::vector<int64_t>& row_shape,
              const void* data, size_t byte_size) {
    size_t total = total_rows();
    if (total == 0 || byte_size % total != 0) {
      throw Error("output '" + name + "': " + std::to_string(byte_size) + " bytes do not split into " +
                  std::to_string(total) + " rows");
    }
    size_t row_bytes = byte_size / total;
    const char* cursor = static_cast<const char*>(data);
    for (uint32_t i = 0; i < size(); ++i) {
      size_t bytes = row_bytes * static_cast<size_t>(rows_[i]);
      if (ok(i) && output_requested(requests_[i], name)) {
        std::vector<int64_t> shape = row_shape;
        if (model_->batching()) shape.insert(shape.begin(), rows_[i]);
        write_output(responses_[i], name, dtype, shape, cursor, bytes);
      }
      cursor += bytes;
    }
  }

  // Output from a tensor shaped like what input() returns (e.g. a passthrough).
  void output(const std::string& name, const Tensor& t) {
    std::vector<int64_t> row_shape = t.shape;
    if (model_->batching() || size() > 1) row_shape.erase(row_shape.begin());
    output(name, t.dtype, row_shape, t.bytes.data(), t.bytes.size());
  }

  // Mark one request (or all) as failed: it gets an error response instead of outputs.
  void fail(uint32_t i, const std::string& message) { errors_.at(i) = message.empty() ? "failed" : message; }
  void fail_all(const std::string& message) {
    for (uint32_t i = 0; i < size(); ++i) fail(i, message);
  }
  bool ok(uint32_t i) const { return errors_.at(i).empty(); }

  // Response parameters (shown to clients beside the outputs).
  void set_parameter(uint32_t i, const std::string& key, const std::string& value) {
    check(TRITONBACKEND_ResponseSetStringParameter(responses_.at(i), key.c_str(), value.c_str()));
  }
  void set_parameter(uint32_t i, const std::string& key, int64_t value) {
    check(TRITONBACKEND_ResponseSetIntParameter(responses_.at(i), key.c_str(), value));
  }
  void set_parameter(uint32_t i, const std::string& key, bool value) {
    check(TRITONBACKEND_ResponseSetBoolParameter(responses_.at(i), key.c_str(), value));
  }

  // Send every response, then report statistics, then release every request. Called once, by execute().
  void finish(uint64_t exec_start, uint64_t compute_start, uint64_t compute_end) {
    for (uint32_t i = 0; i < size(); ++i) {
      if (responses_[i] == nullptr) continue;
      TRITONSERVER_Error* error = ok(i) ? nullptr : TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, errors_[i].c_str());
      report(TRITONBACKEND_ResponseSend(responses_[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL, error));
    }
    uint64_t exec_end = now_ns();  // sending is the "compute output" phase in Triton's statistics
    uint64_t succeeded_rows = 0;
    for (uint32_t i = 0; i < size(); ++i) {
      report(TRITONBACKEND_ModelInstanceReportStatistics(instance_, requests_[i], ok(i), exec_start, compute_start,
                                                         compute_end, exec_end));
      if (ok(i)) succeeded_rows += static_cast<uint64_t>(rows_[i]);
    }
    if (succeeded_rows > 0) {
      report(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, succeeded_rows, exec_start, compute_start,
                                                              compute_end, exec_end));
    }
    for (TRITONBACKEND_Request* request : requests_) {
      report(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
    }
  }

 private:
  std::vector<int64_t> row_shape_of(const std::vector<int64_t>& shape) const {
    if (!model_->batching()) return shape;
    return std::vector<int64_t>(shape.begin() + (shape.empty() ? 0 : 1), shape.end());
  }

  static int64_t first_dim(TRITONBACKEND_Request* request) {
    TRITONBACKEND_Input* input = nullptr;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    if (TRITONSERVER_Error* err = TRITONBACKEND_RequestInputByIndex(request, 0, &input)) {
      TRITONSERVER_ErrorDelete(err);
      return 1;
    }
    check(TRITONBACKEND_InputProperties(input, nullptr, nullptr, &shape, &dims, nullptr, nullptr));
    return dims > 0 ? shape[0] : 1;
  }

  // Past this point there is no caller to throw to: log and carry on releasing.
  static void report(TRITONSERVER_Error* err) {
    if (err == nullptr) return;
    log_error(std::string("labkit: ") + TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
  }

  TRITONBACKEND_ModelInstance* instance_;
  std::vector<TRITONBACKEND_Request*> requests_;
  ModelState* model_;
  std::vector<TRITONBACKEND_Response*> responses_;
  std::vector<std::string> errors_;
  std::vector<int64_t> rows_;
};

// Serve one execution with fn(Batch&). Whatever fn does or throws, every request gets a response,
// statistics and a release; so this returns nullptr (Triton must not touch released requests).
template <class F>
TRITONSERVER_Error* execute(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, uint32_t count,
                            F&& fn) noexcept {
  uint64_t exec_start = now_ns();
  Batch* batch = nullptr;
  TRITONSERVER_Error* setup = guard([&] { batch = new Batch(instance, requests, count); });
  if (setup != nullptr) return setup;  // nothing was answered yet: Triton fails the requests itself
  uint64_t compute_start = now_ns();
  TRITONSERVER_Error* failure = guard([&] { fn(*batch); });
  uint64_t compute_end = now_ns();
  if (failure != nullptr) {
    batch->fail_all(TRITONSERVER_ErrorMessage(failure));
    TRITONSERVER_ErrorDelete(failure);
  }
  batch->finish(exec_start, compute_start, compute_end);
  delete batch;
  return nullptr;
}

}  // namespace labkit

// Define TRITONBACKEND_ModelInitialize/Finalize keeping a StateType (labkit::ModelState or derived)
// per model: what labkit::execute reads to know whether the model batches.
#define LABKIT_MODEL_STATE(StateType)                                                                          \
  extern "C" TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) { \
    return labkit::guard([&] {                                                                                \
      auto* state = new StateType(model);                                                                    \
      labkit::check(TRITONBACKEND_ModelSetState(model, static_cast<labkit::ModelState*>(state)));             \
    });                                                                                                       \
  }                                                                                                           \
  extern "C" TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {   \
    return labkit::guard([&] {                                                                                \
      void* state = nullptr;                                                                                  \
      labkit::check(TRITONBACKEND_ModelState(model, &state));                                                 \
      delete static_cast<labkit::ModelState*>(state);                                                         \
    });                                                                                                       \
  }
