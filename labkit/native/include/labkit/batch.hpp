// labkit/batch.hpp (part of labkit/backend.hpp): labkit::Batch and labkit::execute, one execution
// of the requests Triton batched together.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "labkit/errors.hpp"
#include "labkit/model.hpp"
#include "labkit/tensors.hpp"
#include "triton/core/tritonbackend.h"

namespace labkit {

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
  // dropped early or unwound by an exception still answers and releases what it holds. A backend
  // that builds a Batch itself must then return NULL from TRITONBACKEND_ModelInstanceExecute (catch
  // inside, as execute() does): an error returned there gives Triton back requests already released.
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
    // Whether it was answered with outputs: once the response is sent, ok() can no longer tell,
    // and the statistics reported after sending need it.
    bool succeeded = false;
  };
  void answer(uint32_t i, uint32_t failed) noexcept;
  // Both ways a Batch ends (execute() and the destructor) take the statistics' moments from here,
  // so the two cannot drift apart.
  Timestamps timestamps(uint64_t exec_start, uint64_t work_start, uint64_t work_end) const;
  friend TRITONSERVER_Error* execute_with(TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request**, uint32_t,
                                          void (*)(Batch&, void*), void*) noexcept;

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
