"""Exercises of notebook 07 (the rest of the backend API): a decoupled countdown, and a response parameter."""

from __future__ import annotations

import numpy as np

from ..client.inference import infer_with_parameters, stream_infer
from ..errors import InferenceError
from ..server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs

COUNTDOWN = "countdown"
PARAMETERS_BACKEND, PARAMETERS_MODEL = "respparams", "respparams_passthrough"
#: Where Triton documents response parameters (r23.12): the TRITONBACKEND_ResponseSet*Parameter functions.
BACKEND_HEADER = "https://github.com/triton-inference-server/core/blob/r23.12/include/triton/core/tritonbackend.h"


@exercise(
    "07-countdown",
    "07_backend_api_tour",
    "a decoupled model that streams N responses",
    "loop from n down to 1 and sender.send() one response per number; send the final flag once, after the loop.",
    sources=(COUNTDOWN,),
)
def countdown(server: TritonServer) -> None:
    for n in (5, 1, 0, 12):
        try:
            responses = stream_infer(server, COUNTDOWN, {"N": np.array([n], np.int32)}, timeout_s=5)
        except InferenceError as exc:
            raise NotYet(f"for N={n}: {str(exc).splitlines()[0]}") from None
        for response in responses:
            require_configured_outputs(server, COUNTDOWN, response, shown=f" (a response for N={n})")
        values = [int(r["OUT"][0]) for r in responses]
        wanted = list(range(n, 0, -1))
        if values != wanted:
            raise NotYet(
                f"for N={n} the stream carried {values}; expected {wanted}"
                f"{' (no response at all for N=0)' if n == 0 else ''}."
            )


@exercise(
    "07-sum-parameter",
    "07_backend_api_tour",
    "a response parameter with the sum of the request's values",
    "a response parameter belongs to one request's response and has a type: Triton 23.12 has string, "
    "integer (int64) and bool parameters, and labkit's batch.set_parameter picks one by the C++ type it is "
    "given. Read the comments on TRITONBACKEND_ResponseSetIntParameter in tritonbackend.h (r23.12): "
    f"{BACKEND_HEADER}, and mind what four int32 values can add up to.",
    sources=(PARAMETERS_BACKEND, PARAMETERS_MODEL),
)
def sum_parameter(server: TritonServer) -> None:
    for protocol, values in (("http", [3, -7, 12, 5]), ("grpc", [2_000_000_000, 2_000_000_000, 1, -1])):
        sent = np.array(values, np.int32)
        outputs, params = infer_with_parameters(server, PARAMETERS_MODEL, {"IN0": sent}, ["OUT0"], protocol=protocol)
        if not np.array_equal(outputs["OUT0"], sent):
            raise NotYet(
                f"OUT0 is no longer IN0 (sent {values}, got {outputs['OUT0'].tolist()}).", "keep the passthrough."
            )
        if "sum" not in params:
            raise NotYet(f'the response over {protocol} has no parameter "sum" (it has: {", ".join(sorted(params))}).')
        got, want = params["sum"], int(sent.astype(np.int64).sum())
        if type(got) is not int:
            raise NotYet(
                f'"sum" arrived as {type(got).__name__} {got!r}; it should be an integer parameter.',
                "the type of a response parameter is part of it: a client reads an integer parameter as a "
                f"number, a string one as text (tritonbackend.h, r23.12: {BACKEND_HEADER}).",
            )
        if got != want:
            raise NotYet(
                f'for IN0={values} "sum" was {got}, expected {want}'
                f"{' (int32 overflowed: add up in int64_t)' if values[0] > 10**9 else ''}."
            )
