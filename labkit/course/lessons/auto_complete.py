"""Lesson: configs that leave out inputs, outputs and max_batch_size, completed by the backend.

With auto-complete on, Triton hands a partial config to the backend at load and lets it fill in the
rest: a C++ backend edits the config JSON and returns it with TRITONBACKEND_ModelSetConfig; a Python
model does the same in its static ``auto_complete_config``. The completed config is what the server
then reports (``server.model_config``).

labkit starts Triton with ``--disable-auto-complete-config`` unless asked otherwise, so that every
config serves as written. This lesson therefore runs on a server of its own:

    lab = auto_complete.start_server()        # EmbeddedServer(auto_complete=True)
    print(auto_complete.setup_cpp(lab))       # the completed config, read back from the server
"""

from __future__ import annotations

from typing import Any

from ...server.base import TritonServer
from ...server.launchers.embedded import EmbeddedServer
from .outcome import Outcome

BACKEND = "autofill"
CPP_MODEL = "autofill_cpp"
PY_MODEL = "autofill_py"

SOURCE = r"""// autofill: OUT0 = 2 * IN0. A config may leave out the inputs, the outputs and max_batch_size:
// with auto-complete on, the backend writes them in at load; with it off it says what is missing.
#include <string>

#include "labkit/json.hpp"  // reads the config as JSON

namespace {

using labkit::json;

// The server's own default for batching models, handed to every backend in its backend config:
// --backend-config=default-max-batch-size=N, 4 unless set.
int default_max_batch_size(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* message = nullptr;  // owned by Triton: not deleted here
  labkit::check(TRITONBACKEND_BackendConfig(labkit::model_backend(model), &message));
  const char* base = nullptr;
  size_t size = 0;
  labkit::check(TRITONSERVER_MessageSerializeToJson(message, &base, &size));
  const json config = json::parse(base, base + size, nullptr, false);
  const json cmdline = config.is_object() ? config.value("cmdline", json::object()) : json::object();
  const json value = cmdline.value("default-max-batch-size", json("4"));
  return value.is_string() ? std::stoi(value.get<std::string>()) : value.get<int>();
}

json tensor(const char* name) { return {{"name", name}, {"data_type", "TYPE_FP32"}, {"dims", {4}}}; }

// Fill in what the config leaves out, before anything reads it.
TRITONBACKEND_Model* completed(TRITONBACKEND_Model* model) {
  json config = labkit::model_config(model);
  const bool no_inputs = config.value("input", json::array()).empty();
  const bool no_outputs = config.value("output", json::array()).empty();
  // An explicit max_batch_size: 0 reads the same as none; like Triton's framework backends, this
  // backend takes it as "not set" because it can always batch.
  const json mbs = config.value("max_batch_size", json(0));  // Triton may write int64 as a string
  const bool no_batch = (mbs.is_string() ? std::stoll(mbs.get<std::string>()) : mbs.get<int64_t>()) == 0;
  bool allowed = false;
  labkit::check(TRITONBACKEND_ModelAutoCompleteConfig(model, &allowed));
  if (!allowed) {
    if (no_inputs || no_outputs) {
      throw labkit::Error("model '" + labkit::model_name(model) + "' has no " + (no_inputs ? "inputs" : "outputs") +
                          " in its config and this server runs with auto-complete off "
                          "(--disable-auto-complete-config, labkit's default): write them into config.pbtxt, "
                          "or load the model on a server started with auto_complete=True",
                          TRITONSERVER_ERROR_INVALID_ARG);
    }
    return model;
  }
  std::string filled;
  if (no_inputs) {
    config["input"] = json::array({tensor("IN0")});
    filled += " inputs";
  }
  if (no_outputs) {
    config["output"] = json::array({tensor("OUT0")});
    filled += " outputs";
  }
  if (no_batch) {
    config["max_batch_size"] = default_max_batch_size(model);
    filled += " max_batch_size";
  }
  if (filled.empty()) return model;
  const std::string text = config.dump();
  TRITONSERVER_Message* message = nullptr;
  labkit::check(TRITONSERVER_MessageNewFromSerializedJson(&message, text.data(), text.size()));
  TRITONSERVER_Error* err = TRITONBACKEND_ModelSetConfig(model, 1 /* config format version */, message);
  labkit::log_if_error(TRITONSERVER_MessageDelete(message), "deleting the completed config");
  labkit::check(err);
  labkit::log_info("model " + labkit::model_name(model) + ": auto-completed" + filled);
  return model;
}

struct AutofillState : labkit::ModelState {
  // completed() runs first, so the state reads the config Triton will use.
  explicit AutofillState(TRITONBACKEND_Model* model) : labkit::ModelState(completed(model)) {}
};

}  // namespace

LABKIT_MODEL_STATE(AutofillState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor x = batch.input("IN0");
    for (size_t k = 0; k < x.count<float>(); ++k) x.data<float>()[k] *= 2.0f;
    batch.output("OUT0", x);
  });
}
"""

# Only what cannot be guessed: the name and the backend. No inputs, outputs or max_batch_size.
CPP_CONFIG = f'name: "{CPP_MODEL}"\nbackend: "{BACKEND}"\ninstance_group {{ count: 1 kind: KIND_CPU }}\n'
PY_CONFIG = f'name: "{PY_MODEL}"\nbackend: "python"\ninstance_group {{ count: 1 kind: KIND_CPU }}\n'

PY_SOURCE = '''"""autofill_py: Y = 2 * X; the config names only the model and its backend."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        # Called at load when auto-complete is on, before initialize(). add_input/add_output accept
        # a tensor the config already has, as long as it agrees.
        config = auto_complete_model_config
        config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [4]})
        config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [4]})
        if config.as_dict()["max_batch_size"] == 0:
            config.set_max_batch_size(8)
            config.set_dynamic_batching()
        return config

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", 2 * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
            for r in requests
        ]
'''


def start_server(**options: Any) -> EmbeddedServer:
    """An embedded Triton with auto-complete on (for this lesson only; see the module's docstring)."""
    server = EmbeddedServer(auto_complete=True, **options)
    server.start()
    return server


def write_partial_config(server: TritonServer, model: str, text: str) -> None:
    """Write a config.pbtxt as given. ``repository.write_config`` refuses incomplete configs, which
    is right everywhere except here."""
    server.repository.write_file(model, "config.pbtxt", text, version=None)
    (server.repository.model_dir(model) / "1").mkdir(exist_ok=True)


def setup_cpp(server: TritonServer, source: str = SOURCE) -> dict:
    """Build the autofill backend, load a model whose config omits its tensors; return the config
    the server now holds. On a server with auto-complete off the load fails, saying so."""
    write_partial_config(server, CPP_MODEL, CPP_CONFIG)
    server.cpp_backend(BACKEND, source, [CPP_MODEL])
    return server.model_config(CPP_MODEL)


def setup_python(server: TritonServer, source: str = PY_SOURCE) -> dict:
    """Load the Python model whose config omits its tensors; return the completed config."""
    write_partial_config(server, PY_MODEL, PY_CONFIG)
    server.python_model(PY_MODEL, source)
    return server.model_config(PY_MODEL)


def tensors(config: dict) -> dict[str, Any]:
    """The parts auto-complete fills in, in a short, stable form for printing and comparing."""

    def spec(t: dict) -> str:
        return f"{t['name']} {t['data_type'].removeprefix('TYPE_')} {[int(d) for d in t['dims']]}"

    return {
        "max_batch_size": int(config.get("max_batch_size", 0)),
        "inputs": [spec(t) for t in config.get("input", [])],
        "outputs": [spec(t) for t in config.get("output", [])],
        "dynamic_batching": "dynamic_batching" in config,
    }


def setup(server: TritonServer) -> None:
    """Both models on ``server``, which must run with auto-complete on (``start_server()``)."""
    setup_cpp(server)
    setup_python(server)


def run(server: TritonServer) -> Outcome:
    """Both configs come back completed. Runs on a server of its own with auto-complete on: labkit's
    servers (``server`` included) keep it off."""
    own = start_server()
    try:
        setup(own)
        cpp, py = tensors(own.model_config(CPP_MODEL)), tensors(own.model_config(PY_MODEL))
    finally:
        own.stop()
    ok = all(c["inputs"] and c["outputs"] and c["max_batch_size"] > 0 for c in (cpp, py))
    return Outcome(ok, {"cpp_max_batch_size": cpp["max_batch_size"], "python_max_batch_size": py["max_batch_size"]})
