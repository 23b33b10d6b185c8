"""The two logging helpers every raw-C-API lesson backend begins with: Triton's own log for an error
the API hands back where execute can no longer return it (then the error is deleted), and an info line.
Each lesson's source stays one file a learner can read and compile alone; this keeps the helpers one text."""

LOG_HELPERS = r"""static void log_if_error(const char* call, TRITONSERVER_Error* err) {
  if (err == nullptr) return;
  const std::string line = std::string(call) + " failed: " + TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_Error* unlogged = TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, line.c_str());
  if (unlogged != nullptr) TRITONSERVER_ErrorDelete(unlogged);  // a log that fails has nowhere left to report to
  TRITONSERVER_ErrorDelete(err);
}

static void log_info(const std::string& line) {
  log_if_error("LogMessage", TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, line.c_str()));
}
"""
