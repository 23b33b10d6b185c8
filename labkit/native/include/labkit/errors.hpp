// labkit/errors.hpp (part of labkit/backend.hpp): how errors cross between the helper layer's C++
// and Triton's C API, and the server log that whatever cannot cross is written to.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "triton/core/tritonbackend.h"

namespace labkit {

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

}  // namespace labkit
