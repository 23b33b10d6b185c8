// labkit/backend.hpp: a small C++17 layer over Triton's backend C API, so that a backend written in
// a notebook cell stays short and still does everything a backend owes Triton.
//
//   #include "labkit/backend.hpp"
//
//   LABKIT_MODEL_STATE(labkit::ModelState)   // ModelInitialize/Finalize: read the config once
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
// response (an error response if the code throws), a request that is malformed (input bytes that do
// not match its shape, a shape the others in the batch do not share, an output Triton cannot place)
// fails alone while the others are answered, statistics are reported, and only then are the
// requests released.
//
// This header only declares: the helpers are compiled once per toolchain (labkit/native/src, linked
// into every backend), so a cell's compile covers the cell alone. The model config is JSON
// (nlohmann::json); code that reads it directly includes "labkit/json.hpp", which costs about two
// seconds of compile time. Works with labkit's own declarations of the 23.12 C API or with
// Triton's official r23.12 headers.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlohmann/json_fwd.hpp"
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

// Complete only where "labkit/json.hpp" (or nlohmann/json.hpp) is included.
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

// Owners of what Triton hands over: an error is deleted, and a response that was never sent is
// deleted (its request then still needs an answer), exactly once, whichever way the scope ends.
struct ErrorDeleter {
  void operator()(TRITONSERVER_Error* err) const noexcept;
};
using ErrorPtr = std::unique_ptr<TRITONSERVER_Error, ErrorDeleter>;
struct ResponseDeleter {
  void operator()(TRITONBACKEND_Response* response) const noexcept;
};
using ResponsePtr = std::unique_ptr<TRITONBACKEND_Response, ResponseDeleter>;

// Throws err as labkit::Error (and frees it).
[[noreturn]] void throw_error(TRITONSERVER_Error* err);

// Every API call returns NULL or an error the caller owns: turn the error into an exception
// (freeing it) so code can call the API in a straight line.
inline void check(TRITONSERVER_Error* err) {
  if (err != nullptr) throw_error(err);
}

// The exception being handled (inside a catch block) as a TRITONSERVER_Error*.
TRITONSERVER_Error* error_from_exception() noexcept;

// An exception must never cross into Triton (C code: it would terminate the server). Run f and
// return what an entry point should return: NULL, or the exception as a TRITONSERVER_Error*.
template <class F>
TRITONSERVER_Error* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (...) {
    return error_from_exception();
  }
}

// Steady-clock nanoseconds: the clock Triton expects statistics timestamps from.
uint64_t now_ns();

// ---- logging into the server's own log, tagged with the caller's file:line -----------------------

void log(TRITONSERVER_LogLevel level, const std::string& message, const char* file = __builtin_FILE(),
         int line = __builtin_LINE());
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
void log_if_error(TRITONSERVER_Error* err, const char* what);

// ---- backend, model and instance accessors --------------------------------------------------------

// Refuse to run on a server whose backend API is older than the one compiled against (a backend
// built with the r23.12 headers must not load into an older Triton, and a build against a newer
// API must not load into 23.12).
void check_api_version();

std::string backend_name(TRITONBACKEND_Backend* backend);
std::string model_name(TRITONBACKEND_Model* model);
uint64_t model_version(TRITONBACKEND_Model* model);
// The model's folder in the repository, for backends that read files (weights, vocabularies).
std::string model_directory(TRITONBACKEND_Model* model);
TRITONBACKEND_Backend* model_backend(TRITONBACKEND_Model* model);
// The config Triton actually uses (config.pbtxt plus defaults), as JSON: "max_batch_size",
// "input": [{"name", "data_type": "TYPE_FP32", "dims": [...]}, ...], "output", "parameters", ...
// (include "labkit/json.hpp" to call it).
json model_config(TRITONBACKEND_Model* model);
TRITONBACKEND_Model* instance_model(TRITONBACKEND_ModelInstance* instance);
std::string instance_name(TRITONBACKEND_ModelInstance* instance);
TRITONSERVER_InstanceGroupKind instance_kind(TRITONBACKEND_ModelInstance* instance);
int32_t instance_device(TRITONBACKEND_ModelInstance* instance);

// ---- datatypes, shapes and the config's spelling of them -------------------------------------------

std::string dtype_string(TRITONSERVER_DataType dtype);
// The config says "TYPE_FP32" and "TYPE_STRING"; the API says "FP32" and "BYTES".
TRITONSERVER_DataType config_dtype(const std::string& config_type);
// The dims of a config tensor entry; Triton may write 64-bit integers as JSON strings.
std::vector<int64_t> config_dims(const json& tensor);
std::string shape_string(const std::vector<int64_t>& shape);
// Elements in a shape (1 for a scalar).
int64_t element_count(const std::vector<int64_t>& shape);

// ---- per-model state ---------------------------------------------------------------------------------

// One input or output of the model's config.
struct TensorSpec {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::string data_type;      // as the config spells it, e.g. "TYPE_FP32"
  std::vector<int64_t> dims;  // without the batch dimension; -1 for a variable size
};

// What labkit keeps per model. A backend's own model state derives from it (labkit::execute and
// model_state<S>() read it through the model's state pointer, and refuse a state of another type).
struct ModelState {
  explicit ModelState(TRITONBACKEND_Model* m);
  virtual ~ModelState();
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

  // With max_batch_size > 0 every tensor has an extra leading batch dimension not in the config.
  bool batching() const { return max_batch_size > 0; }
  // A string parameter of the config ("parameters { key: ... value: { string_value: ... } }").
  std::string parameter(const std::string& key, const std::string& fallback = "") const;

  TRITONBACKEND_Model* model;
  std::string name;
  uint64_t version;
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;

 private:
  std::shared_ptr<const json> config_;

 public:
  // The whole config as JSON (include "labkit/json.hpp" to read it).
  const json& config;
};

// The labkit::ModelState behind a model's state pointer; nullptr when the model has none. Throws a
// clear Error for a state the backend set itself (not created by LABKIT_MODEL_STATE).
ModelState* known_state(TRITONBACKEND_Model* model);

// The model's state as S (labkit::ModelState or a type derived from it).
template <class S = ModelState>
S& model_state(TRITONBACKEND_Model* model) {
  ModelState* state = known_state(model);
  if (state == nullptr) throw Error("model has no state: TRITONBACKEND_ModelInitialize did not set one");
  S* typed = dynamic_cast<S*>(state);
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

// A client may ask for a subset of the outputs; an output it did not ask for must not be added.
bool output_requested(TRITONBACKEND_Request* request, const std::string& name);
// Add output `name` to a response and return byte_size bytes of CPU memory to fill in place.
void* output_buffer(TRITONBACKEND_Response* response, const std::string& name, TRITONSERVER_DataType dtype,
                    const std::vector<int64_t>& shape, size_t byte_size);
// Add output `name` to a response with a copy of byte_size bytes of data.
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

// ---- custom metrics -------------------------------------------------------------------------------------

// A metric name of the backend's own on /metrics. Keep it in backend state (created in
// TRITONBACKEND_Initialize, destroyed in TRITONBACKEND_Finalize), never in a global: Triton's
// metrics registry is gone by the time a global destructor would run.
class MetricFamily {
 public:
  MetricFamily(const std::string& name, const std::string& description,
               TRITONSERVER_MetricKind kind = TRITONSERVER_METRIC_KIND_COUNTER);
  ~MetricFamily();
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
  Metric(const MetricFamily& family, const std::vector<std::pair<std::string, std::string>>& labels);
  ~Metric();
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  void increment(double amount);
  void set(double value);  // gauges only
  double value() const;

 private:
  void note(TRITONSERVER_Error* err);
  TRITONSERVER_Metric* metric_ = nullptr;
  bool warned_ = false;
};

// ---- one execution: the requests Triton batched together -------------------------------------------

class Batch {
 public:
  // Creates a response per request and checks every request's inputs; a request that is
  // malformed fails alone here, before the backend's code sees it. Throws (and execute() hands the
  // requests back to Triton) only while nothing has been created for them.
  Batch(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, uint32_t count);
  ~Batch();
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
  TRITONBACKEND_Request* request(uint32_t i) const { return requests_.at(i).request; }
  TRITONBACKEND_Response* response(uint32_t i) const { return requests_.at(i).response.get(); }
  // Request i's batch dimension (1 for a model without batching).
  int64_t rows(uint32_t i) const { return requests_.at(i).rows; }
  // Rows in the tensors input() returns: those of the requests that take part in the batch.
  uint64_t total_rows();
  bool ok(uint32_t i) const;

  // Input `name` of every request that takes part, joined into one tensor along the batch
  // dimension. For a model without batching (several requests are rare there), a leading
  // dimension is added when more than one request takes part. The requests taking part are fixed
  // at the first input() or output() call: those still sound whose inputs have the same shape as
  // the first one's (a request that differs, e.g. under allow_ragged_batch, fails alone).
  Tensor input(const std::string& name);

  // Split data (total_rows() rows, each of row_shape) into output `name` of every request taking
  // part. Fixed-size datatypes only; BYTES outputs go through output(name, Tensor) or write_output.
  void output(const std::string& name, TRITONSERVER_DataType dtype, const std::vector<int64_t>& row_shape,
              const void* data, size_t byte_size);
  // The inverse of input(): a tensor shaped like what input() returns, e.g. for a passthrough or
  // an element-wise operation. Uses the per-request byte counts recorded by input(), so BYTES
  // passes through too.
  void output(const std::string& name, const Tensor& t);

  // Request i gets an error response instead of outputs; the others are unaffected.
  void fail(uint32_t i, const std::string& message, TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL);
  void fail_all(const std::string& message, TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL);

  // Key/value pairs returned to the client with request i's response.
  void set_parameter(uint32_t i, const std::string& key, const std::string& value);
  void set_parameter(uint32_t i, const std::string& key, const char* value) { set_parameter(i, key, std::string(value)); }
  void set_parameter(uint32_t i, const std::string& key, bool value);
  // Any integer type (a template, so that int, size_t, ... are not ambiguous with bool).
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  void set_parameter(uint32_t i, const std::string& key, T value) {
    set_int_parameter(i, key, static_cast<int64_t>(value));
  }
  // Triton 23.12 has no floating-point response parameters: send a string instead.
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  void set_parameter(uint32_t i, const std::string& key, T value) = delete;

  // Send every response, report statistics, then release every request, in that order; only the
  // first call does anything. execute() calls it; the destructor does when nobody did, so a Batch
  // dropped early or unwound by an exception still answers and releases what it holds.
  void finish(Timestamps t) noexcept;

  // When input() last finished and output() first started (0 if never): execute() uses them to
  // split the time into compute_input / compute_infer / compute_output.
  uint64_t inputs_done_ns() const { return inputs_done_; }
  uint64_t outputs_start_ns() const { return outputs_start_; }

 private:
  void set_int_parameter(uint32_t i, const std::string& key, int64_t value);
  const std::vector<uint32_t>& members();
  std::vector<int64_t> row_shape_of(const std::vector<int64_t>& shape) const;
  void scatter(const std::string& name, TRITONSERVER_DataType dtype, const std::vector<int64_t>& row_shape,
               const char* cursor, const std::vector<uint32_t>& who, const std::vector<size_t>& sizes);

  // One request of the execution and everything its answer is built from.
  struct Slot {
    TRITONBACKEND_Request* request = nullptr;
    ResponsePtr response;  // null if Triton could not create one, or once sent
    std::string error;     // empty while the request is sound
    TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
    int64_t rows = 1;
  };
  void answer(uint32_t i, uint32_t failed) noexcept;

  TRITONBACKEND_ModelInstance* instance_;
  std::vector<Slot> requests_;
  ModelState* model_ = nullptr;
  std::unique_ptr<ModelState> owned_model_;
  std::vector<uint32_t> members_;
  bool members_fixed_ = false;
  bool finished_ = false;
  uint64_t created_ = 0;
  uint64_t inputs_done_ = 0;
  uint64_t outputs_start_ = 0;
};

// Serve one execution with fn(batch, context); see execute() below.
TRITONSERVER_Error* execute_with(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
                                 uint32_t count, void (*fn)(Batch&, void*), void* context) noexcept;

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
  return execute_with(
      instance, requests, count, [](Batch& batch, void* context) { (*static_cast<std::remove_reference_t<F>*>(context))(batch); },
      const_cast<void*>(static_cast<const void*>(&fn)));
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
    LABKIT_TRY(delete ::labkit::known_state(model));                                            \
  }
