"""Lesson: a C++ backend that returns key/value parameters beside its outputs.

A backend may attach string, integer and boolean parameters to a response any time before sending
it (TRITONBACKEND_ResponseSet{String,Int,Bool}Parameter; ``Batch::set_parameter`` in labkit's
helper layer). Clients find them in the response's ``parameters``, over HTTP and gRPC alike.

    lab = labkit.start()
    response_parameters.setup(lab)
    print(response_parameters.ask(lab, "grpc"))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...client.inference import infer_with_parameters
from ...repository import model_config
from ...server.base import TritonServer
from .outcome import Outcome

BACKEND = "respparams"
MODEL = "respparams_passthrough"

SOURCE = r"""// respparams: a passthrough (IN0 -> OUT0) whose responses also carry three parameters, one of
// each type 23.12 offers: a string, an integer and a boolean.
#include <algorithm>
#include <string>

#include "labkit/backend.hpp"

LABKIT_MODEL_STATE(labkit::ModelState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor in = batch.input("IN0");
    batch.output("OUT0", in);
    for (uint32_t i = 0; i < batch.size(); ++i) {
      if (!batch.ok(i)) continue;  // an error response carries the error, nothing else
      const int32_t* row = in.data<int32_t>() + 4 * i;
      batch.set_parameter(i, "served_by", "labkit " + batch.model().name);       // string
      batch.set_parameter(i, "requests_in_batch", batch.size());                  // integer
      batch.set_parameter(i, "all_positive", std::all_of(row, row + 4, [](int32_t v) { return v > 0; }));  // bool
    }
  });
}
"""

CONFIG = model_config(MODEL, BACKEND, [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])


def setup(server: TritonServer, source: str = SOURCE) -> None:
    """Build the backend and serve its model."""
    server.repository.write_config(CONFIG)
    server.cpp_backend(BACKEND, source, [MODEL])


@dataclass
class ParametersResult:
    protocol: str
    sent: np.ndarray
    echoed: np.ndarray
    parameters: dict[str, Any]

    @property
    def ok(self) -> bool:
        p = self.parameters
        return (
            np.array_equal(self.echoed, self.sent)
            and p.get("served_by") == f"labkit {MODEL}"
            and type(p.get("requests_in_batch")) is int
            and p.get("all_positive") is bool(np.all(self.sent > 0))
        )

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r} ({type(v).__name__})" for k, v in sorted(self.parameters.items()))
        return f"{MODEL} over {self.protocol}: {'ok' if self.ok else 'WRONG'}\n  parameters: {shown}"


def ask(server: TritonServer, protocol: str = "http", values: list[int] | None = None) -> ParametersResult:
    """One request; the outputs and the response's parameters as the client sees them."""
    sent = np.asarray(values if values is not None else [1, 2, 3, 4], dtype=np.int32)
    outputs, params = infer_with_parameters(server, MODEL, {"IN0": sent}, ["OUT0"], protocol=protocol)
    return ParametersResult(protocol, sent, outputs["OUT0"], params)


def run(server: TritonServer) -> Outcome:
    """The three parameters reach the client over HTTP and over gRPC."""
    setup(server)
    http, grpc = (ask(server, p) for p in ("http", "grpc"))
    return Outcome(http.ok and grpc.ok, {"http": http.ok, "grpc": grpc.ok})
