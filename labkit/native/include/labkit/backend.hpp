// labkit/backend.hpp: a small header-only C++17 layer over Triton's backend C API, so that a
// backend written in a notebook cell stays short and still does everything a backend owes Triton.
//
//   #include "labkit/backend.hpp"
//
//   LABKIT_MODEL_STATE(labkit::ModelState)   // ModelInitialize/Finalize: parse the config once
//
//   TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
//       TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
//     return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
//       labkit::Tensor x = batch.input("IN0");     // IN0 of every request, one contiguous buffer
//       batch.output("OUT0", x);                   // split back into one output per request
//     });
//   }
//
// labkit::execute owns the part that is easy to get wrong: every request gets exactly one final
// response (an error response if the code throws), statistics are reported per request and per
// batch, and only then are the requests released.
//
// Needs nlohmann/json.hpp on the include path (PyPI package nlohmann-json). Works with labkit's
// own declarations of the 23.12 C API or with Triton's official r23.12 headers.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "triton/core/tritonbackend.h"

// Triton finds the entry points with dlsym, so they must be in the dynamic symbol table even
// under -fvisibility=hidden. Triton's own header does not mark them on Linux; re-declaring them
// here does, for either header. A later definition also inherits C linkage from these
// declarations, so `extern "C"` on the definition is optional.
#define LABKIT_EXPORT extern "C" __attribute__((visibility("default")))
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_BackendAttribute* backend_attributes);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatcherInitialize(
    TRITONBACKEND_Batcher** batcher, TRITONBACKEND_Model* model);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatcherFinalize(TRITONBACKEND_Batcher* batcher);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatchInitialize(const TRITONBACKEND_Batcher* batcher, void** userp);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatchIncludeRequest(
    TRITONBACKEND_Request* request, void* userp, bool* should_include);
LABKIT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelBatchFinalize(void* userp);

namespace labkit {

using json = nlohmann::json;

// ---- errors: C++ exceptions inside, TRITONSERVER_Error* at the C boundary ------------------------

// An exception that carries a Triton error code, so the client sees INVALID_ARG rather than a
// generic INTERNAL when the backend knows better.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL)
      : std::runtime_error(message), code(code) {}
  TRITONSERVER_Error_Code code;
};

// Every API call returns NULL or an error the caller owns: turn the error into an exception
// (freeing it) so code can call the API in a straight line.
inline void check(TRITONSERVER_Error* err) {
  if (err == nullptr) return;
  std::string message = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_Error_Code code = TRITONSERVER_ErrorCode(err);
  TRITONSERVER_ErrorDelete(err);
  throw Error(message, code);
}

// An exception must never cross into Triton (C code: it would terminate the server). Run f and
// return what an entry point should return: NULL, or the exception as a TRITONSERVER_Error*.
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

// Steady-clock nanoseconds: the clock Triton expects statistics timestamps from.
inline uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// ---- logging into the server's own log, tagged with the caller's file:line -----------------------

inline void log(TRITONSERVER_LogLevel level, const std::string& message, const char* file = __builtin_FILE(),
                int line = __builtin_LINE()) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, file, line, message.c_str());
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);  // a lost log line must not fail a request
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

// Past the point where anything can be returned to Triton (sending, releasing), errors can only
// be logged; the remaining requests must still be handled.
inline void log_if_error(TRITONSERVER_Error* err, const char* what) {
  if (err == nullptr) return;
  log_error(std::string("labkit: ") + what + ": " + TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

// ---- backend, model and instance accessors --------------------------------------------------------

// Refuse to run on a server whose backend API is older than the one compiled against (a backend
// built with the r23.12 headers must not load into an older Triton, and a build against a newer
// API must not load into 23.12).
inline void check_api_version() {
  uint32_t major = 0, minor = 0;
  check(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
    throw Error("backend built for Triton backend API " + std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
                    std::to_string(TRITONBACKEND_API_VERSION_MINOR) + " but the server offers " +
                    std::to_string(major) + "." + std::to_string(minor),
                TRITONSERVER_ERROR_UNSUPPORTED);
  }
}

inline std::string backend_name(TRITONBACKEND_Backend* backend) {
  const char* name = nullptr;
  check(TRITONBACKEND_BackendName(backend, &name));
  return name;
}

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

// The model's folder in the repository, for backends that read files (weights, vocabularies).
inline std::string model_directory(TRITONBACKEND_Model* model) {
  TRITONBACKEND_ArtifactType type;
  const char* location = nullptr;
  check(TRITONBACKEND_ModelRepository(model, &type, &location));
  return location;
}

inline TRITONBACKEND_Backend* model_backend(TRITONBACKEND_Model* model) {
  TRITONBACKEND_Backend* backend = nullptr;
  check(TRITONBACKEND_ModelBackend(model, &backend));
  return backend;
}

// The config Triton actually uses (config.pbtxt plus defaults), as JSON: "max_batch_size",
// "input": [{"name", "data_type": "TYPE_FP32", "dims": [...]}, ...], "output", "parameters", ...
inline json model_config(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* message = nullptr;
  check(TRITONBACKEND_ModelConfig(model, 1 /* the only config format version */, &message));
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  json config = err == nullptr ? json::parse(base, base + size, nullptr, false) : json();
  log_if_error(TRITONSERVER_MessageDelete(message), "deleting the model config message");
  check(err);
  if (config.is_discarded()) throw Error("Triton's model config is not valid JSON");
  return config;
}

inline TRITONBACKEND_Model* instance_model(TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = nullptr;
  check(TRITONBACKEND_ModelInstanceModel(instance, &model));
  return model;
}

inline std::string instance_name(TRITONBACKEND_ModelInstance* instance) {
  const char* name = nullptr;
  check(TRITONBACKEND_ModelInstanceName(instance, &name));
  return name;
}

inline TRITONSERVER_InstanceGroupKind instance_kind(TRITONBACKEND_ModelInstance* instance) {
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_AUTO;
  check(TRITONBACKEND_ModelInstanceKind(instance, &kind));
  return kind;
}

inline int32_t instance_device(TRITONBACKEND_ModelInstance* instance) {
  int32_t device = 0;
  check(TRITONBACKEND_ModelInstanceDeviceId(instance, &device));
  return device;
}

// ---- datatypes, shapes and the config's spelling of them -------------------------------------------

inline std::string dtype_string(TRITONSERVER_DataType dtype) { return TRITONSERVER_DataTypeString(dtype); }

// The config says "TYPE_FP32" and "TYPE_STRING"; the API says "FP32" and "BYTES".
inline TRITONSERVER_DataType config_dtype(const std::string& config_type) {
  std::string name = config_type.rfind("TYPE_", 0) == 0 ? config_type.substr(5) : config_type;
  if (name == "STRING") name = "BYTES";
  return TRITONSERVER_StringToDataType(name.c_str());
}

// The dims of a config tensor entry; Triton may write 64-bit integers as JSON strings.
inline std::vector<int64_t> config_dims(const json& tensor) {
  std::vector<int64_t> dims;
  for (const json& d : tensor.value("dims", json::array())) {
    dims.push_back(d.is_string() ? std::stoll(d.get<std::string>()) : d.get<int64_t>());
  }
  return dims;
}

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- per-model state ---------------------------------------------------------------------------------

// What labkit keeps per model. A backend's own model state derives from it (labkit::execute and
// model_state<S>() read it through the model's state pointer).
struct ModelState {
  explicit ModelState(TRITONBACKEND_Model* m)
      : model(m), name(model_name(m)), version(model_version(m)), config(model_config(m)) {
    const json mbs = config.value("max_batch_size", json(0));
    max_batch_size = mbs.is_string() ? std::stoi(mbs.get<std::string>()) : mbs.get<int>();
  }
  virtual ~ModelState() = default;
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

  // With max_batch_size > 0 every tensor has an extra leading batch dimension not in the config.
  bool batching() const { return max_batch_size > 0; }

  TRITONBACKEND_Model* model;
  std::string name;
  uint64_t version;
  json config;
  int max_batch_size = 0;
};

// The model's state as S (labkit::ModelState or a type derived from it).
template <class S = ModelState>
S& model_state(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  check(TRITONBACKEND_ModelState(model, &state));
  if (state == nullptr) throw Error("model has no state: TRITONBACKEND_ModelInitialize did not set one");
  S* typed = dynamic_cast<S*>(static_cast<ModelState*>(state));
  if (typed == nullptr) throw Error("the model's state is not of the type asked for");
  return *typed;
}

template <class S = ModelState>
S& model_state(TRITONBACKEND_ModelInstance* instance) {
  return model_state<S>(instance_model(instance));
}

// ---- tensors --------------------------------------------------------------------------------------------

// A tensor copied into contiguous CPU memory: the simplest thing to compute on.
struct Tensor {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
  // Set by Batch::input: how many bytes each request contributed, so the same split can be
  // undone on output even for BYTES tensors, whose elements vary in size.
  std::vector<size_t> request_bytes;

  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <class T>
  size_t count() const { return bytes.size() / sizeof(T); }
  size_t byte_size() const { return bytes.size(); }
  // Elements according to the shape (for BYTES, the number of strings).
  int64_t element_count() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Append input `name` of one request to out.bytes, joining its buffers, and set out's name,
// dtype and shape. Returns the number of bytes appended.
inline size_t append_input(TRITONBACKEND_Request* request, const std::string& name, Tensor& out) {
  TRITONBACKEND_Input* input = nullptr;
  if (TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, name.c_str(), &input)) {
    TRITONSERVER_ErrorDelete(err);
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
    if (memory == TRITONSERVER_MEMORY_GPU) {
      throw Error("input '" + name + "' is in GPU memory; labkit's helpers only read CPU memory",
                  TRITONSERVER_ERROR_UNSUPPORTED);
    }
    if (offset + size > out.bytes.size()) throw Error("input '" + name + "': buffers exceed the announced size");
    if (size > 0) std::memcpy(out.bytes.data() + offset, buffer, size);
    offset += size;
  }
  return offset - start;
}

// One request's input `name`, contiguous.
inline Tensor read_input(TRITONBACKEND_Request* request, const std::string& name) {
  Tensor t;
  append_input(request, name, t);
  return t;
}

inline std::vector<std::string> input_names(TRITONBACKEND_Request* request) {
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

// A client may ask for a subset of the outputs; an output it did not ask for must not be added.
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

// Add output `name` to a response and return byte_size bytes of CPU memory to fill in place.
inline void* output_buffer(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                           const std::vector<int64_t>& shape, size_t byte_size) {
  TRITONBACKEND_Output* output = nullptr;
  check(TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), dtype, shape.data(),
                                     static_cast<uint32_t>(shape.size())));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  check(TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &memory, &memory_id));
  if (memory == TRITONSERVER_MEMORY_GPU) {
    throw Error("Triton placed output '" + name + "' in GPU memory; labkit's helpers only write CPU memory",
                TRITONSERVER_ERROR_UNSUPPORTED);
  }
  return buffer;
}

// Add output `name` to a response with a copy of byte_size bytes of data.
inline void write_output(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                         const std::vector<int64_t>& shape, const void* data, size_t byte_size) {
  void* buffer = output_buffer(response, name, dtype, shape, byte_size);
  if (byte_size > 0) std::memcpy(buffer, data, byte_size);
}

inline void write_output(TRITONBACKEND_Response* response, const Tensor& t) {
  write_output(response, t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
}

// ---- responses, statistics and release: the end of every request's life ---------------------------

// Send a response as the final one for its request. Triton owns it afterwards.
inline void send(TRITONBACKEND_Response* response) {
  check(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr));
}

// Send a response that tells the client what went wrong instead of carrying outputs.
inline void send_error(TRITONBACKEND_Response* response, const std::string& message,
                       TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL) {
  check(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                                   TRITONSERVER_ErrorNew(code, message.c_str())));
}

// The four moments Triton's statistics are built from: exec_start .. compute_start is
// compute_input, compute_start .. compute_end is compute_infer, the rest is compute_output.
struct Timestamps {
  uint64_t exec_start = 0;
  uint64_t compute_start = 0;
  uint64_t compute_end = 0;
  uint64_t exec_end = 0;
};

// Must come before release: a released request can no longer be reported.
inline void report_request(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, bool success,
                           const Timestamps& t) {
  check(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, success, t.exec_start, t.compute_start,
                                                    t.compute_end, t.exec_end));
}

// Once per execution; batch_size is the number of inferences (sum of the requests' batch sizes).
inline void report_batch(TRITONBACKEND_ModelInstance* instance, uint64_t batch_size, const Timestamps& t) {
  check(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, batch_size, t.exec_start, t.compute_start,
                                                         t.compute_end, t.exec_end));
}

inline void release(TRITONBACKEND_Request* request) {
  check(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
}

// ---- custom metrics -------------------------------------------------------------------------------------

// A metric name of the backend's own on /metrics. Keep it in backend state (created in
// TRITONBACKEND_Initialize, destroyed in TRITONBACKEND_Finalize), never in a global: Triton's
// metrics registry is gone by the time a global destructor would run.
class MetricFamily {
 public:
  MetricFamily(const std::string& name, const std::string& description,
               TRITONSERVER_MetricKind kind = TRITONSERVER_METRIC_KIND_COUNTER) {
    check(TRITONSERVER_MetricFamilyNew(&family_, kind, name.c_str(), description.c_str()));
  }
  ~MetricFamily() { log_if_error(TRITONSERVER_MetricFamilyDelete(family_), "deleting a metric family"); }
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;
  TRITONSERVER_MetricFamily* get() const { return family_; }

 private:
  TRITONSERVER_MetricFamily* family_ = nullptr;
};

// One labelled series of a family, e.g. {model="m"}. Destroy it before its family. Updates never
// throw: a metric that cannot be updated must not fail inference.
class Metric {
 public:
  Metric(const MetricFamily& family, const std::vector<std::pair<std::string, std::string>>& labels) {
    std::vector<TRITONSERVER_Parameter*> owned;
    for (const auto& kv : labels) {
      owned.push_back(TRITONSERVER_ParameterNew(kv.first.c_str(), TRITONSERVER_PARAMETER_STRING, kv.second.c_str()));
    }
    std::vector<const TRITONSERVER_Parameter*> params(owned.begin(), owned.end());
    TRITONSERVER_Error* err = TRITONSERVER_MetricNew(&metric_, family.get(), params.data(), params.size());
    for (TRITONSERVER_Parameter* p : owned) TRITONSERVER_ParameterDelete(p);  // MetricNew copied them
    check(err);
  }
  ~Metric() { log_if_error(TRITONSERVER_MetricDelete(metric_), "deleting a metric"); }
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  void increment(double amount) { note(TRITONSERVER_MetricIncrement(metric_, amount)); }
  void set(double value) { note(TRITONSERVER_MetricSet(metric_, value)); }  // gauges only
  double value() const {
    double v = 0;
    check(TRITONSERVER_MetricValue(metric_, &v));
    return v;
  }

 private:
  void note(TRITONSERVER_Error* err) {
    if (err != nullptr && !warned_) {
      warned_ = true;  // once: a broken metric would otherwise flood the log on every request
      log_warn(std::string("labkit: metric update failed: ") + TRITONSERVER_ErrorMessage(err));
    }
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  }
  TRITONSERVER_Metric* metric_ = nullptr;
  bool warned_ = false;
};

// ---- one execution: the requests Triton batched together -------------------------------------------

class Batch {
 public:
  // Never throws once responses exist: a throw here makes execute() hand the requests back to
  // Triton, which is only allowed while nothing has been created for them.
  Batch(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, uint32_t count)
      : instance_(instance), requests_(requests, requests + count) {
    TRITONBACKEND_Model* model = instance_model(instance);
    void* state = nullptr;
    check(TRITONBACKEND_ModelState(model, &state));
    if (state != nullptr) {
      model_ = static_cast<ModelState*>(state);
    } else {  // no LABKIT_MODEL_STATE: read the config now (costs a JSON parse per execution)
      owned_model_ = std::make_unique<ModelState>(model);
      model_ = owned_model_.get();
    }
    responses_.assign(count, nullptr);
    errors_.assign(count, std::string());
    codes_.assign(count, TRITONSERVER_ERROR_INTERNAL);
    rows_.assign(count, 1);
    for (uint32_t i = 0; i < count; ++i) {
      if (TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&responses_[i], requests_[i])) {
        fail(i, std::string("could not create a response: ") + TRITONSERVER_ErrorMessage(err));
        TRITONSERVER_ErrorDelete(err);
        responses_[i] = nullptr;
        continue;
      }
      if (model_->batching()) rows_[i] = batch_dim(i);
    }
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  const ModelState& model() const { return *model_; }
  // The model's state as the backend's own type (derived from labkit::ModelState).
  template <class S>
  S& model_as() {
    S* typed = dynamic_cast<S*>(model_);
    if (typed == nullptr) throw Error("the model's state is not of the type asked for (is LABKIT_MODEL_STATE set?)");
    return *typed;
  }
  TRITONBACKEND_ModelInstance* instance() const { return instance_; }
  // Number of requests in this execution ("requests in batch").
  uint32_t size() const { return static_cast<uint32_t>(requests_.size()); }
  TRITONBACKEND_Request* request(uint32_t i) const { return requests_.at(i); }
  TRITONBACKEND_Response* response(uint32_t i) const { return responses_.at(i); }
  // Request i's batch dimension (1 for a model without batching).
  int64_t rows(uint32_t i) const { return rows_.at(i); }
  // Inferences in this execution: the batch size Triton's statistics count.
  uint64_t total_rows() const {
    uint64_t n = 0;
    for (int64_t r : rows_) n += static_cast<uint64_t>(r);
    return n;
  }
  bool ok(uint32_t i) const { return errors_.at(i).empty() && responses_.at(i) != nullptr; }

  // Input `name` of every request joined into one tensor along the batch dimension. For a
  // model without batching (several requests are rare there), a leading dimension of size() is
  // added when there is more than one request.
  Tensor input(const std::string& name) {
    Tensor all;
    std::vector<int64_t> row_shape;
    for (uint32_t i = 0; i < size(); ++i) {
      Tensor one;
      size_t n = append_input(requests_[i], name, one);
      std::vector<int64_t> rs = row_shape_of(one.shape);
      if (i == 0) {
        all.name = one.name;
        all.dtype = one.dtype;
        row_shape = rs;
      } else if (one.dtype != all.dtype || rs != row_shape) {
        throw Error("input '" + name + "' differs between the requests of one batch: " + dtype_string(all.dtype) +
                        " " + shape_string(row_shape) + " vs " + dtype_string(one.dtype) + " " + shape_string(rs),
                    TRITONSERVER_ERROR_INVALID_ARG);
      }
      all.bytes.insert(all.bytes.end(), one.bytes.begin(), one.bytes.end());
      all.request_bytes.push_back(n);
    }
    all.shape = row_shape;
    if (model_->batching()) {
      all.shape.insert(all.shape.begin(), static_cast<int64_t>(total_rows()));
    } else if (size() > 1) {
      all.shape.insert(all.shape.begin(), static_cast<int64_t>(size()));
    }
    if (outputs_start_ == 0) inputs_done_ = now_ns();  // the end of compute_input, see execute()
    return all;
  }

  // Split data (total_rows() rows, each of row_shape) into output `name` of every request.
  // Fixed-size datatypes only; BYTES outputs go through output(name, Tensor) or write_output.
  void output(const std::string& name, TRITONSERVER_DataType dtype, const std::vector<int64_t>& row_shape,
              const void* data, size_t byte_size) {
    if (TRITONSERVER_DataTypeByteSize(dtype) == 0) {
      throw Error("output '" + name + "': " + dtype_string(dtype) +
                  " elements vary in size, so rows cannot be located by byte offset; use "
                  "output(name, tensor) with a tensor from input(), or labkit::write_output per request");
    }
    const uint64_t total = model_->batching() ? total_rows() : size();
    if (total == 0 || byte_size % total != 0) {
      throw Error("output '" + name + "': " + std::to_string(byte_size) + " bytes do not split into " +
                  std::to_string(total) + " equal parts");
    }
    const size_t part = byte_size / total;
    std::vector<size_t> sizes;
    for (uint32_t i = 0; i < size(); ++i) sizes.push_back(part * static_cast<size_t>(model_->batching() ? rows_[i] : 1));
    scatter(name, dtype, row_shape, static_cast<const char*>(data), sizes);
  }

  // The inverse of input(): a tensor shaped like what input() returns, e.g. for a passthrough or
  // an element-wise operation. Uses the per-request byte counts recorded by input() when they
  // still add up, so BYTES passes through too.
  void output(const std::string& name, const Tensor& t) {
    std::vector<int64_t> row_shape = t.shape;
    if ((model_->batching() || size() > 1) && !row_shape.empty()) row_shape.erase(row_shape.begin());
    size_t recorded = 0;
    for (size_t n : t.request_bytes) recorded += n;
    if (t.request_bytes.size() == size() && recorded == t.bytes.size()) {
      scatter(name, t.dtype, row_shape, t.bytes.data(), t.request_bytes);
    } else {
      output(name, t.dtype, row_shape, t.bytes.data(), t.bytes.size());
    }
  }

  // Request i gets an error response instead of outputs; the others are unaffected.
  void fail(uint32_t i, const std::string& message, TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL) {
    errors_.at(i) = message.empty() ? "request failed" : message;
    codes_.at(i) = code;
  }
  void fail_all(const std::string& message, TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL) {
    for (uint32_t i = 0; i < size(); ++i) fail(i, message, code);
  }

  // Key/value pairs returned to the client with request i's response.
  void set_parameter(uint32_t i, const std::string& key, const std::string& value) {
    check(TRITONBACKEND_ResponseSetStringParameter(responses_.at(i), key.c_str(), value.c_str()));
  }
  void set_parameter(uint32_t i, const std::string& key, const char* value) { set_parameter(i, key, std::string(value)); }
  void set_parameter(uint32_t i, const std::string& key, bool value) {
    check(TRITONBACKEND_ResponseSetBoolParameter(responses_.at(i), key.c_str(), value));
  }
  // Any integer type (a template, so that int, size_t, ... are not ambiguous with bool).
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  void set_parameter(uint32_t i, const std::string& key, T value) {
    check(TRITONBACKEND_ResponseSetIntParameter(responses_.at(i), key.c_str(), static_cast<int64_t>(value)));
  }
  // Triton 23.12 has no floating-point response parameters: send a string instead.
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  void set_parameter(uint32_t i, const std::string& key, T value) = delete;

  // Called once by execute(): send every response, report statistics, then release every
  // request, in that order. Nothing may throw from here on.
  void finish(Timestamps t) noexcept {
    for (uint32_t i = 0; i < size(); ++i) {
      if (responses_[i] == nullptr) continue;
      TRITONSERVER_Error* error = ok(i) ? nullptr : TRITONSERVER_ErrorNew(codes_[i], errors_[i].c_str());
      log_if_error(TRITONBACKEND_ResponseSend(responses_[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL, error),
                   "sending a response");
    }
    t.exec_end = now_ns();  // sending belongs to compute_output
    uint64_t succeeded = 0;
    for (uint32_t i = 0; i < size(); ++i) {
      log_if_error(TRITONBACKEND_ModelInstanceReportStatistics(instance_, requests_[i], ok(i), t.exec_start,
                                                               t.compute_start, t.compute_end, t.exec_end),
                   "reporting request statistics");
      if (ok(i)) succeeded += static_cast<uint64_t>(rows_[i]);
    }
    if (succeeded > 0) {
      log_if_error(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, succeeded, t.exec_start,
                                                                    t.compute_start, t.compute_end, t.exec_end),
                   "reporting batch statistics");
    }
    for (TRITONBACKEND_Request* request : requests_) {
      log_if_error(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL), "releasing a request");
    }
  }

  // When input() last finished and output() first started (0 if never): execute() uses them to
  // split the time into compute_input / compute_infer / compute_output.
  uint64_t inputs_done_ns() const { return inputs_done_; }
  uint64_t outputs_start_ns() const { return outputs_start_; }

 private:
  std::vector<int64_t> row_shape_of(const std::vector<int64_t>& shape) const {
    if (!model_->batching() || shape.empty()) return shape;
    return std::vector<int64_t>(shape.begin() + 1, shape.end());
  }

  // The batch dimension of request i, from its first input; a request whose inputs cannot be
  // read fails alone instead of failing the batch.
  int64_t batch_dim(uint32_t i) {
    TRITONBACKEND_Input* input = nullptr;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    TRITONSERVER_Error* err = TRITONBACKEND_RequestInputByIndex(requests_[i], 0, &input);
    if (err == nullptr) err = TRITONBACKEND_InputProperties(input, nullptr, nullptr, &shape, &dims, nullptr, nullptr);
    if (err != nullptr) {
      fail(i, std::string("cannot read the request's inputs: ") + TRITONSERVER_ErrorMessage(err),
           TRITONSERVER_ERROR_INVALID_ARG);
      TRITONSERVER_ErrorDelete(err);
      return 1;
    }
    return dims > 0 ? shape[0] : 1;
  }

  void scatter(const std::string& name, TRITONSERVER_DataType dtype, const std::vector<int64_t>& row_shape,
               const char* cursor, const std::vector<size_t>& sizes) {
    if (outputs_start_ == 0) outputs_start_ = now_ns();
    for (uint32_t i = 0; i < size(); ++i) {
      if (ok(i) && output_requested(requests_[i], name)) {
        std::vector<int64_t> shape = row_shape;
        if (model_->batching()) shape.insert(shape.begin(), rows_[i]);
        write_output(responses_[i], name, dtype, shape, cursor, sizes[i]);
      }
      cursor += sizes[i];
    }
  }

  TRITONBACKEND_ModelInstance* instance_;
  std::vector<TRITONBACKEND_Request*> requests_;
  ModelState* model_ = nullptr;
  std::unique_ptr<ModelState> owned_model_;
  std::vector<TRITONBACKEND_Response*> responses_;
  std::vector<std::string> errors_;
  std::vector<TRITONSERVER_Error_Code> codes_;
  std::vector<int64_t> rows_;
  uint64_t inputs_done_ = 0;
  uint64_t outputs_start_ = 0;
};

// Serve one execution with fn(Batch&). Whatever fn does or throws, every request gets its final
// response, its statistics and its release, so this returns NULL (Triton must not touch the
// requests again). It returns an error only if it could not start, before any response existed;
// Triton then fails the requests itself.
//
// Statistics: compute_input runs until the last batch.input() call, compute_infer until the first
// batch.output() call, compute_output until the responses are sent. Without those calls the
// whole of fn counts as compute_infer.
template <class F>
TRITONSERVER_Error* execute(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, uint32_t count,
                            F&& fn) noexcept {
  Timestamps t;
  t.exec_start = now_ns();
  std::unique_ptr<Batch> batch;
  if (TRITONSERVER_Error* err = guard([&] { batch = std::make_unique<Batch>(instance, requests, count); })) {
    return err;
  }
  const uint64_t fn_start = now_ns();
  TRITONSERVER_Error* failure = guard([&] { fn(*batch); });
  const uint64_t fn_end = now_ns();
  t.compute_start = batch->inputs_done_ns() != 0 ? batch->inputs_done_ns() : fn_start;
  t.compute_end = batch->outputs_start_ns() != 0 ? batch->outputs_start_ns() : fn_end;
  if (t.compute_end < t.compute_start) t.compute_end = t.compute_start;
  if (failure != nullptr) {
    batch->fail_all(TRITONSERVER_ErrorMessage(failure), TRITONSERVER_ErrorCode(failure));
    TRITONSERVER_ErrorDelete(failure);
  }
  batch->finish(t);
  return nullptr;
}

}  // namespace labkit

// Run the statements and return NULL, or the exception they threw as a TRITONSERVER_Error*:
//   TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
//     LABKIT_TRY(labkit::log_info("loading " + labkit::model_name(model)));
//   }
#define LABKIT_TRY(...) return ::labkit::guard([&]() { __VA_ARGS__; })

// Throw labkit::Error if a Triton call failed.
#define LABKIT_CHECK(call) ::labkit::check(call)

// Define TRITONBACKEND_ModelInitialize/Finalize keeping one StateType per model (labkit::ModelState
// or derived from it). A StateType constructor that throws fails the model's load with its message.
#define LABKIT_MODEL_STATE(StateType)                                                           \
  TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {               \
    LABKIT_TRY(std::unique_ptr<::labkit::ModelState> state(new StateType(model));               \
               ::labkit::check(TRITONBACKEND_ModelSetState(model, state.get()));                \
               state.release());                                                                 \
  }                                                                                             \
  TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {                 \
    LABKIT_TRY(void* state = nullptr; ::labkit::check(TRITONBACKEND_ModelState(model, &state)); \
               delete static_cast<::labkit::ModelState*>(state));                               \
  }
