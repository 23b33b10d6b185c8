"""A C++ backend that scales its input by a factor, shared by test_cpp and the soak test (test_soak)."""

from __future__ import annotations

import numpy as np

import labkit


def scaling_source(factor: int, *, refuse_load: bool = False) -> str:
    """A backend whose OUT0 is IN0 * factor (INT32); with ``refuse_load`` its model state throws at
    load, so Triton refuses the model (ModelLoadError) although the library compiled."""
    refuse = 'throw labkit::Error("this model refuses to load");' if refuse_load else ""
    return f"""#include "labkit/backend.hpp"
struct Scaled : labkit::ModelState {{
  explicit Scaled(TRITONBACKEND_Model* model) : labkit::ModelState(model) {{ {refuse} }}
}};
LABKIT_MODEL_STATE(Scaled)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {{
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {{
    labkit::Tensor in = batch.input("IN0");
    for (size_t k = 0; k < in.count<int32_t>(); ++k) in.data<int32_t>()[k] *= {factor};
    batch.output("OUT0", in);
  }});
}}
"""


SCALING_INPUT = np.array([1, 2, 3, 4], np.int32)


def scaling_model(server, name: str, backend: str) -> None:
    server.repository.write_config(
        labkit.model_config(name, backend, [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    )


def scaled_by(server, name: str) -> int:
    """The factor the model serves now."""
    out = labkit.infer(server, name, {"IN0": SCALING_INPUT})["OUT0"]
    assert (out % SCALING_INPUT == 0).all() and len(set((out // SCALING_INPUT).tolist())) == 1, out
    return int(out[0])
