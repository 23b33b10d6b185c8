// labkit::Batch and labkit::execute: one execution of the requests Triton batched together, where a
// malformed request fails alone and every request is answered, reported and released exactly once.
#include <algorithm>
#include <cstring>

#include "labkit/backend.hpp"

namespace labkit {

namespace {

// The batch dimension of a request, from its first input (as Triton's own backend utilities read
// it); -1 if its inputs cannot be read.
int64_t first_dim(TRITONBACKEND_Request* request) {
  TRITONBACKEND_Input* input = nullptr;
  const int64_t* shape = nullptr;
  uint32_t dims = 0;
  ErrorPtr err{TRITONBACKEND_RequestInputByIndex(request, 0, &input)};
  if (!err) err.reset(TRITONBACKEND_InputProperties(input, nullptr, nullptr, &shape, &dims, nullptr, nullptr));
  if (err) return -1;
  return dims > 0 ? shape[0] : 1;
}

// (name, datatype, shape without the batch dimension) of every input, in name order: requests of
// one batch must agree on it for their inputs to be joined.
struct Signature {
  std::vector<std::string> names;
  std::vector<TRITONSERVER_DataType> dtypes;
  std::vector<std::vector<int64_t>> shapes;
};

Signature signature(TRITONBACKEND_Request* request, bool batching) {
  Signature s;
  for (const std::string& name : input_names(request)) s.names.push_back(name);
  std::sort(s.names.begin(), s.names.end());
  for (const std::string& name : s.names) {
    TRITONBACKEND_Input* input = nullptr;
    TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    check(TRITONBACKEND_RequestInput(request, name.c_str(), &input));
    check(TRITONBACKEND_InputProperties(input, nullptr, &dtype, &shape, &dims, nullptr, nullptr));
    const uint32_t skip = batching && dims > 0 ? 1 : 0;
    s.dtypes.push_back(dtype);
    s.shapes.emplace_back(shape + skip, shape + dims);
  }
  return s;
}

// Why request `s` cannot join a batch whose first request has `first`; empty if it can.
std::string difference(const Signature& first, const Signature& s) {
  if (s.names != first.names) return "its inputs are not those of the first request of this execution";
  for (size_t k = 0; k < s.names.size(); ++k) {
    if (s.dtypes[k] != first.dtypes[k] || s.shapes[k] != first.shapes[k]) {
      return "input '" + s.names[k] + "' is " + dtype_string(s.dtypes[k]) + " " + shape_string(s.shapes[k]) +
             " per row here but " + dtype_string(first.dtypes[k]) + " " + shape_string(first.shapes[k]) +
             " in the first request of this execution; batch.input() joins requests of one shape only "
             "(under allow_ragged_batch, read each request with labkit::read_input(batch.request(i), name))";
    }
  }
  return "";
}

}  // namespace

Batch::Batch(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, uint32_t count)
    : instance_(instance), requests_(count), created_(now_ns()) {
  for (uint32_t i = 0; i < count; ++i) requests_[i].request = requests[i];
  TRITONBACKEND_Model* model = instance_model(instance);
  model_ = known_state(model);  // throws, before any response exists, for a state labkit did not make
  if (model_ == nullptr) {      // no LABKIT_MODEL_STATE: read the config now (costs a JSON parse per execution)
    owned_model_ = std::make_unique<ModelState>(model);
    model_ = owned_model_.get();
  }
  for (uint32_t i = 0; i < count; ++i) {
    Slot& slot = requests_[i];
    TRITONBACKEND_Response* response = nullptr;
    if (ErrorPtr err{TRITONBACKEND_ResponseNew(&response, slot.request)}) {
      fail(i, std::string("could not create a response: ") + TRITONSERVER_ErrorMessage(err.get()));
      continue;
    }
    slot.response.reset(response);
    if (model_->batching()) slot.rows = std::max<int64_t>(first_dim(slot.request), 1);
    // Triton 23.12 does not check that an input's bytes match its shape: a short request would
    // make the backend read past its data, into (or beyond) the next request's.
    std::string problem;
    try {
      problem = input_problem(slot.request);
    } catch (const std::exception& e) {
      problem = std::string("cannot read the request's inputs: ") + e.what();
    }
    if (!problem.empty()) fail(i, problem, TRITONSERVER_ERROR_INVALID_ARG);
  }
}

Batch::~Batch() { finish(timestamps(created_, created_, now_ns())); }

Timestamps Batch::timestamps(uint64_t exec_start, uint64_t work_start, uint64_t work_end) const {
  Timestamps t;
  t.exec_start = exec_start;
  t.compute_start = inputs_done_ != 0 ? inputs_done_ : work_start;
  t.compute_end = std::max(outputs_start_ != 0 ? outputs_start_ : work_end, t.compute_start);
  return t;
}

bool Batch::ok(uint32_t i) const {
  const Slot& slot = requests_.at(i);
  return slot.error.empty() && slot.response != nullptr;
}

const std::vector<uint32_t>& Batch::members() {
  if (members_fixed_) return members_;
  members_fixed_ = true;
  Signature first;
  for (uint32_t i = 0; i < size(); ++i) {
    if (!ok(i)) continue;
    Signature s;
    try {
      s = signature(requests_[i].request, model_->batching());
    } catch (const std::exception& e) {
      fail(i, std::string("cannot read the request's inputs: ") + e.what(), TRITONSERVER_ERROR_INVALID_ARG);
      continue;
    }
    if (members_.empty()) {
      first = s;
    } else if (std::string why = difference(first, s); !why.empty()) {
      fail(i, why, TRITONSERVER_ERROR_INVALID_ARG);
      continue;
    }
    members_.push_back(i);
  }
  return members_;
}

uint64_t Batch::total_rows() {
  uint64_t n = 0;
  for (uint32_t i : members()) n += static_cast<uint64_t>(model_->batching() ? requests_[i].rows : 1);
  return n;
}

std::vector<int64_t> Batch::row_shape_of(const std::vector<int64_t>& shape) const {
  if (!model_->batching() || shape.empty()) return shape;
  return std::vector<int64_t>(shape.begin() + 1, shape.end());
}

Tensor Batch::input(const std::string& name) {
  const std::vector<uint32_t>& who = members();
  Tensor all;
  all.name = name;
  all.requests = who;
  // One copy: size the buffer first, then every request's buffers go straight into it.
  size_t total = 0;
  for (uint32_t i : who) {
    TRITONBACKEND_Input* input = nullptr;
    uint64_t bytes = 0;
    ErrorPtr err{TRITONBACKEND_RequestInput(requests_[i].request, name.c_str(), &input)};
    if (!err) err.reset(TRITONBACKEND_InputProperties(input, nullptr, nullptr, nullptr, nullptr, &bytes, nullptr));
    if (!err) total += bytes;  // an unreadable input is reported by append_input below
  }
  all.bytes.reserve(total);
  std::vector<int64_t> request_shape;
  for (uint32_t i : who) {
    all.request_bytes.push_back(append_input(requests_[i].request, name, all));
    request_shape = all.shape;
  }
  all.shape = row_shape_of(request_shape);
  if (model_->batching()) {
    all.shape.insert(all.shape.begin(), static_cast<int64_t>(total_rows()));
  } else if (who.size() > 1) {
    all.shape.insert(all.shape.begin(), static_cast<int64_t>(who.size()));
  }
  if (outputs_start_ == 0) inputs_done_ = now_ns();  // the end of compute_input, see execute()
  return all;
}

void Batch::output(const std::string& name, TRITONSERVER_DataType dtype, const std::vector<int64_t>& row_shape,
                   const void* data, size_t byte_size) {
  if (TRITONSERVER_DataTypeByteSize(dtype) == 0) {
    throw Error("output '" + name + "': " + dtype_string(dtype) +
                " elements vary in size, so rows cannot be located by byte offset; use "
                "output(name, tensor) with a tensor from input(), or labkit::write_output per request");
  }
  const std::vector<uint32_t> who = members();
  if (who.empty()) return;  // every request already failed: there is no one to answer
  const uint64_t total = model_->batching() ? total_rows() : who.size();
  const char* unit = model_->batching() ? " rows" : " requests";
  if (byte_size % total != 0) {
    throw Error("output '" + name + "': " + std::to_string(byte_size) + " bytes do not split into " +
                std::to_string(total) + unit);
  }
  const size_t part = byte_size / total;
  const int64_t need = byte_size_of(dtype, row_shape);
  if (need != static_cast<int64_t>(part)) {
    throw Error("output '" + name + "': row shape " + shape_string(row_shape) + " of " + dtype_string(dtype) +
                " needs " + std::to_string(need) + " bytes a row, but the data has " + std::to_string(part) +
                " bytes a row (" + std::to_string(byte_size) + " bytes for " + std::to_string(total) + unit + ")");
  }
  std::vector<size_t> sizes;
  for (uint32_t i : who) sizes.push_back(part * static_cast<size_t>(model_->batching() ? requests_[i].rows : 1));
  scatter(name, dtype, row_shape, static_cast<const char*>(data), who, sizes);
}

void Batch::output(const std::string& name, const Tensor& t) {
  const std::vector<uint32_t>& who = t.requests.empty() ? members() : t.requests;
  std::vector<int64_t> row_shape = t.shape;
  if ((model_->batching() || who.size() > 1) && !row_shape.empty()) row_shape.erase(row_shape.begin());
  size_t recorded = 0;
  for (size_t n : t.request_bytes) recorded += n;
  if (t.request_bytes.size() != who.size() || recorded != t.bytes.size()) {
    output(name, t.dtype, row_shape, t.bytes.data(), t.bytes.size());
    return;
  }
  // Each request's part must fit the shape its output will declare.
  const char* cursor = t.bytes.data();
  for (size_t k = 0; k < who.size(); ++k) {
    const int64_t rows = model_->batching() ? requests_[who[k]].rows : 1;
    std::vector<int64_t> shape = row_shape;
    if (model_->batching()) shape.insert(shape.begin(), rows);
    const int64_t need = byte_size_of(t.dtype, shape);
    const int64_t have = static_cast<int64_t>(t.request_bytes[k]);
    if (need >= 0 && need != have) {
      throw Error("output '" + name + "': shape " + shape_string(shape) + " of " + dtype_string(t.dtype) + " needs " +
                  std::to_string(need) + " bytes, but the tensor holds " + std::to_string(have) +
                  " for request " + std::to_string(who[k] + 1));
    }
    if (need < 0 && count_strings(cursor, t.request_bytes[k]) != element_count(shape)) {
      throw Error("output '" + name + "': shape " + shape_string(shape) + " needs " +
                  std::to_string(element_count(shape)) + " strings, but the tensor's part for request " +
                  std::to_string(who[k] + 1) + " does not hold that many length-prefixed strings");
    }
    cursor += t.request_bytes[k];
  }
  scatter(name, t.dtype, row_shape, t.bytes.data(), who, t.request_bytes);
}

void Batch::scatter(const std::string& name, TRITONSERVER_DataType dtype, const std::vector<int64_t>& row_shape,
                    const char* cursor, const std::vector<uint32_t>& who, const std::vector<size_t>& sizes) {
  if (outputs_start_ == 0) outputs_start_ = now_ns();
  for (size_t k = 0; k < who.size(); ++k) {
    const uint32_t i = who[k];
    // Triton may refuse one request's output (e.g. a client's shared-memory region is too small):
    // that request fails, the others still get theirs.
    try {
      if (ok(i) && output_requested(requests_[i].request, name)) {
        std::vector<int64_t> shape = row_shape;
        if (model_->batching()) shape.insert(shape.begin(), requests_[i].rows);
        write_output(requests_[i].response.get(), name, dtype, shape, cursor, sizes[k]);
      }
    } catch (const Error& e) {
      fail(i, "output '" + name + "': " + e.what(), e.code);
    } catch (const std::exception& e) {
      fail(i, "output '" + name + "': " + e.what());
    }
    cursor += sizes[k];
  }
}

void Batch::fail(uint32_t i, const std::string& message, TRITONSERVER_Error_Code code) {
  Slot& slot = requests_.at(i);
  slot.error = message.empty() ? "request failed" : message;
  slot.code = code;
}

void Batch::fail_all(const std::string& message, TRITONSERVER_Error_Code code) {
  for (uint32_t i = 0; i < size(); ++i) {
    if (requests_[i].error.empty()) fail(i, message, code);  // keep a request's own, more precise reason
  }
}

void Batch::set_parameter(uint32_t i, const std::string& key, const std::string& value) {
  check(TRITONBACKEND_ResponseSetStringParameter(response(i), key.c_str(), value.c_str()));
}

void Batch::set_parameter(uint32_t i, const std::string& key, bool value) {
  check(TRITONBACKEND_ResponseSetBoolParameter(response(i), key.c_str(), value));
}

void Batch::set_int_parameter(uint32_t i, const std::string& key, int64_t value) {
  check(TRITONBACKEND_ResponseSetIntParameter(response(i), key.c_str(), value));
}

namespace {

// Past the point where anything can be returned to Triton, a failed call can only be logged: the
// remaining requests must still be answered and released.
template <class F>
void logged(const char* what, F&& f) noexcept {
  try {
    f();
  } catch (const std::exception& e) {
    log_error(std::string("labkit: ") + what + ": " + e.what());
  } catch (...) {
    log_error(std::string("labkit: ") + what + ": unknown C++ exception");
  }
}

}  // namespace

void Batch::answer(uint32_t i, uint32_t failed) noexcept {
  Slot& slot = requests_[i];
  if (!ok(i)) {
    // A request failing beside others that succeed is worth a line at the default level: it
    // shows which one, and that it shared the execution. Failures of the whole batch stay verbose.
    const TRITONSERVER_LogLevel level = failed < size() ? TRITONSERVER_LOG_INFO : TRITONSERVER_LOG_VERBOSE;
    log(level, "model " + model_->name + ": request " + std::to_string(i + 1) + " of " + std::to_string(size()) +
                   " failed: " + slot.error);
  }
  if (slot.response == nullptr) return;
  // Triton owns a response once it is sent, even when sending fails.
  TRITONBACKEND_Response* response = slot.response.release();
  logged("sending a response",
         [&] { slot.succeeded ? send(response) : send_error(response, slot.error, slot.code); });
}

void Batch::finish(Timestamps t) noexcept {
  if (finished_) return;
  finished_ = true;
  uint32_t failed = 0;
  for (uint32_t i = 0; i < size(); ++i) {
    requests_[i].succeeded = ok(i);
    failed += requests_[i].succeeded ? 0 : 1;
  }
  for (uint32_t i = 0; i < size(); ++i) answer(i, failed);
  t.exec_end = now_ns();  // sending belongs to compute_output
  // The executed batch size, as Triton's own backend utilities report it: every request's batch
  // dimension (1 each without batching), whether or not it succeeded, once per execution.
  uint64_t executed = 0;
  for (const Slot& slot : requests_) {
    logged("reporting request statistics", [&] { report_request(instance_, slot.request, slot.succeeded, t); });
    executed += static_cast<uint64_t>(slot.rows);
  }
  logged("reporting batch statistics", [&] { report_batch(instance_, executed, t); });
  for (const Slot& slot : requests_) logged("releasing a request", [&] { release(slot.request); });
}

TRITONSERVER_Error* execute_with(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
                                 uint32_t count, void (*fn)(Batch&, void*), void* context) noexcept {
  const uint64_t exec_start = now_ns();
  std::unique_ptr<Batch> batch;
  if (TRITONSERVER_Error* err = guard([&] { batch = std::make_unique<Batch>(instance, requests, count); })) {
    return err;  // nothing was created for the requests: Triton fails them itself
  }
  const uint64_t fn_start = now_ns();
  const ErrorPtr failure{guard([&] { fn(*batch, context); })};
  const uint64_t fn_end = now_ns();
  if (failure) batch->fail_all(TRITONSERVER_ErrorMessage(failure.get()), TRITONSERVER_ErrorCode(failure.get()));
  batch->finish(batch->timestamps(exec_start, fn_start, fn_end));
  return nullptr;
}

}  // namespace labkit
