// The helper layer declared in labkit/errors.hpp, model.hpp and metrics.hpp. Compiled once per
// toolchain, flags and headers (labkit.native.helpers) and linked into every backend library, so a
// cell compiles only itself.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "labkit/json.hpp"

namespace labkit {

// ---- errors, time, logging ---------------------------------------------------------------------------

void ErrorDeleter::operator()(TRITONSERVER_Error* err) const noexcept { TRITONSERVER_ErrorDelete(err); }

void ResponseDeleter::operator()(TRITONBACKEND_Response* response) const noexcept {
  log_if_error(TRITONBACKEND_ResponseDelete(response), "deleting an unsent response");
}

void throw_error(TRITONSERVER_Error* err) {
  const ErrorPtr owned{err};
  throw Error(TRITONSERVER_ErrorMessage(err), TRITONSERVER_ErrorCode(err));
}

TRITONSERVER_Error* error_from_exception() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return TRITONSERVER_ErrorNew(e.code, e.what());
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "unknown C++ exception");
  }
}

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void log(TRITONSERVER_LogLevel level, const std::string& message, const char* file, int line) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  ErrorPtr lost{TRITONSERVER_LogMessage(level, file, line, message.c_str())};  // must not fail a request
}

void log_if_error(TRITONSERVER_Error* err, const char* what) {
  const ErrorPtr owned{err};
  if (owned) log_error(std::string("labkit: ") + what + ": " + TRITONSERVER_ErrorMessage(err));
}

// ---- backend, model and instance accessors --------------------------------------------------------

void check_api_version() {
  uint32_t major = 0, minor = 0;
  check(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
    throw Error("backend built for Triton backend API " + std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
                    std::to_string(TRITONBACKEND_API_VERSION_MINOR) + " but the server offers " +
                    std::to_string(major) + "." + std::to_string(minor),
                TRITONSERVER_ERROR_UNSUPPORTED);
  }
}

std::string backend_name(TRITONBACKEND_Backend* backend) {
  const char* name = nullptr;
  check(TRITONBACKEND_BackendName(backend, &name));
  return name;
}

std::string model_name(TRITONBACKEND_Model* model) {
  const char* name = nullptr;
  check(TRITONBACKEND_ModelName(model, &name));
  return name;
}

uint64_t model_version(TRITONBACKEND_Model* model) {
  uint64_t version = 0;
  check(TRITONBACKEND_ModelVersion(model, &version));
  return version;
}

std::string model_directory(TRITONBACKEND_Model* model) {
  TRITONBACKEND_ArtifactType type;
  const char* location = nullptr;
  check(TRITONBACKEND_ModelRepository(model, &type, &location));
  return location;
}

TRITONBACKEND_Backend* model_backend(TRITONBACKEND_Model* model) {
  TRITONBACKEND_Backend* backend = nullptr;
  check(TRITONBACKEND_ModelBackend(model, &backend));
  return backend;
}

namespace {
// The config's JSON text points into the message: it is deleted only once parsing is over, and
// also when serializing or parsing throws.
struct MessageDeleter {
  void operator()(TRITONSERVER_Message* message) const noexcept {
    log_if_error(TRITONSERVER_MessageDelete(message), "deleting the model config message");
  }
};
}  // namespace

json model_config(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* raw = nullptr;
  check(TRITONBACKEND_ModelConfig(model, 1 /* the only config format version */, &raw));
  const std::unique_ptr<TRITONSERVER_Message, MessageDeleter> message{raw};
  const char* base = nullptr;
  size_t size = 0;
  check(TRITONSERVER_MessageSerializeToJson(message.get(), &base, &size));
  json config = json::parse(base, base + size, nullptr, false);
  if (config.is_discarded()) throw Error("Triton's model config is not valid JSON");
  return config;
}

TRITONBACKEND_Model* instance_model(TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = nullptr;
  check(TRITONBACKEND_ModelInstanceModel(instance, &model));
  return model;
}

std::string instance_name(TRITONBACKEND_ModelInstance* instance) {
  const char* name = nullptr;
  check(TRITONBACKEND_ModelInstanceName(instance, &name));
  return name;
}

TRITONSERVER_InstanceGroupKind instance_kind(TRITONBACKEND_ModelInstance* instance) {
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_AUTO;
  check(TRITONBACKEND_ModelInstanceKind(instance, &kind));
  return kind;
}

int32_t instance_device(TRITONBACKEND_ModelInstance* instance) {
  int32_t device = 0;
  check(TRITONBACKEND_ModelInstanceDeviceId(instance, &device));
  return device;
}

// ---- datatypes and shapes ------------------------------------------------------------------------------

std::string dtype_string(TRITONSERVER_DataType dtype) { return TRITONSERVER_DataTypeString(dtype); }

TRITONSERVER_DataType config_dtype(const std::string& config_type) {
  std::string name = config_type.rfind("TYPE_", 0) == 0 ? config_type.substr(5) : config_type;
  if (name == "STRING") name = "BYTES";
  return TRITONSERVER_StringToDataType(name.c_str());
}

namespace {
int64_t json_int(const json& value, int64_t fallback) {
  if (value.is_string()) return std::stoll(value.get<std::string>());  // Triton writes int64 as strings
  return value.is_number() ? value.get<int64_t>() : fallback;
}

}  // namespace

std::vector<int64_t> config_dims(const json& tensor) {
  std::vector<int64_t> dims;
  for (const json& d : tensor.value("dims", json::array())) dims.push_back(json_int(d, 0));
  return dims;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t byte_size_of(TRITONSERVER_DataType dtype, const std::vector<int64_t>& shape) {
  const uint32_t size = TRITONSERVER_DataTypeByteSize(dtype);
  return size == 0 ? -1 : element_count(shape) * static_cast<int64_t>(size);
}

int64_t count_strings(const char* data, size_t byte_size) {
  // Triton's BYTES layout: each element is a 4-byte little-endian length, then that many bytes.
  int64_t count = 0;
  size_t at = 0;
  while (at < byte_size) {
    if (byte_size - at < 4) return -1;
    uint32_t length = 0;
    for (int b = 3; b >= 0; --b) length = (length << 8) | static_cast<unsigned char>(data[at + b]);
    at += 4;
    if (byte_size - at < length) return -1;
    at += length;
    ++count;
  }
  return count;
}

// ---- per-model state ---------------------------------------------------------------------------------

namespace {

// The ModelStates this library created: a state pointer not among them was set by the backend
// itself (with a type labkit knows nothing about) and must not be cast.
std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::unordered_set<const void*>& registry() {
  static std::unordered_set<const void*> states;
  return states;
}

std::vector<TensorSpec> tensor_specs(const json& list) {
  std::vector<TensorSpec> specs;
  if (!list.is_array()) return specs;
  for (const json& t : list) {
    TensorSpec spec;
    spec.name = t.value("name", "");
    spec.data_type = t.value("data_type", "");
    spec.dtype = config_dtype(spec.data_type);
    spec.dims = config_dims(t);
    specs.push_back(spec);
  }
  return specs;
}

}  // namespace

ModelState::ModelState(TRITONBACKEND_Model* m)
    : model(m),
      name(model_name(m)),
      version(model_version(m)),
      config_(std::make_shared<const json>(model_config(m))),
      config(*config_) {
  max_batch_size = static_cast<int>(json_int(config.value("max_batch_size", json(0)), 0));
  inputs = tensor_specs(config.value("input", json::array()));
  outputs = tensor_specs(config.value("output", json::array()));
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().insert(this);
}

ModelState::~ModelState() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(this);
}

std::string ModelState::parameter(const std::string& key, const std::string& fallback) const {
  const json params = config.value("parameters", json::object());
  if (!params.is_object() || !params.contains(key)) return fallback;
  return params[key].value("string_value", fallback);
}

ModelState* known_state(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  check(TRITONBACKEND_ModelState(model, &state));
  if (state == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    if (registry().count(state) != 0) return static_cast<ModelState*>(state);
  }
  throw Error("model '" + model_name(model) +
                  "': its state pointer was set by the backend itself (TRITONBACKEND_ModelSetState with a "
                  "type of its own), so labkit cannot read it. Use LABKIT_MODEL_STATE(YourState) with YourState "
                  "derived from labkit::ModelState (or set a labkit::ModelState* yourself).",
              TRITONSERVER_ERROR_INTERNAL);
}

// ---- custom metrics -------------------------------------------------------------------------------------

MetricFamily::MetricFamily(const std::string& name, const std::string& description, TRITONSERVER_MetricKind kind) {
  check(TRITONSERVER_MetricFamilyNew(&family_, kind, name.c_str(), description.c_str()));
}

MetricFamily::~MetricFamily() { log_if_error(TRITONSERVER_MetricFamilyDelete(family_), "deleting a metric family"); }

namespace {
struct ParameterDeleter {
  void operator()(TRITONSERVER_Parameter* parameter) const noexcept { TRITONSERVER_ParameterDelete(parameter); }
};
using ParameterPtr = std::unique_ptr<TRITONSERVER_Parameter, ParameterDeleter>;
}  // namespace

Metric::Metric(const MetricFamily& family, const std::vector<std::pair<std::string, std::string>>& labels) {
  // MetricNew copies the labels, so they are freed when the constructor ends, whichever way.
  std::vector<ParameterPtr> owned;
  std::vector<const TRITONSERVER_Parameter*> params;
  for (const auto& kv : labels) {
    ParameterPtr label{TRITONSERVER_ParameterNew(kv.first.c_str(), TRITONSERVER_PARAMETER_STRING, kv.second.c_str())};
    params.push_back(label.get());
    owned.push_back(std::move(label));
  }
  check(TRITONSERVER_MetricNew(&metric_, family.get(), params.data(), params.size()));
}

Metric::~Metric() { log_if_error(TRITONSERVER_MetricDelete(metric_), "deleting a metric"); }

void Metric::increment(double amount) { note(TRITONSERVER_MetricIncrement(metric_, amount)); }

void Metric::set(double value) { note(TRITONSERVER_MetricSet(metric_, value)); }

double Metric::value() const {
  double v = 0;
  check(TRITONSERVER_MetricValue(metric_, &v));
  return v;
}

void Metric::note(TRITONSERVER_Error* err) {
  const ErrorPtr owned{err};
  if (owned && !warned_) {
    warned_ = true;  // once: a broken metric would otherwise flood the log on every request
    log_warn(std::string("labkit: metric update failed: ") + TRITONSERVER_ErrorMessage(err));
  }
}

}  // namespace labkit
