// A backend that answers every request with an empty response. It keeps one flag per request in a
// buffer made by new[] but held by a std::unique_ptr<char>, which frees it with delete, not delete[]:
// g++ 12 warns about that (-Wmismatched-new-delete), and this project's -Werror makes it an error.
#include <cstdint>
#include <cstring>
#include <memory>

#include "triton/core/tritonbackend.h"

extern "C" {

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* /* instance */, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  std::unique_ptr<char> answered(new char[request_count]);
  std::memset(answered.get(), 0, request_count);
  for (uint32_t i = 0; i < request_count; ++i) {
    TRITONBACKEND_Response* response = nullptr;
    if (TRITONBACKEND_ResponseNew(&response, requests[i]) == nullptr) {
      answered.get()[i] = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr) == nullptr;
    }
    TRITONBACKEND_RequestRelease(requests[i], TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  return nullptr;
}  // STRICT: here the unique_ptr frees, with delete, what new[] made

}  // extern "C"
