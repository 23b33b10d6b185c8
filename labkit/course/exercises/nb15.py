"""Exercises of notebook 15: a decoupled countdown answered in C++ through a response factory, and a Python
stream that stops when its client cancels it. The checks stream their own requests over gRPC to the models
the notebook serves."""

from __future__ import annotations

import queue

import numpy as np
import tritonclient.grpc as grpcclient

from ...client.inference import stream_infer
from ...errors import LabkitError
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs

BACKEND, MODEL = "countdowncpp", "countdown_cpp"


@exercise("15-countdown-cpp", sources=(BACKEND, MODEL))
def countdown_cpp(server: TritonServer) -> None:
    for n in (5, 1, 0, 12):
        try:
            responses = stream_infer(server, MODEL, {"N": np.array([n], np.int32)}, timeout_s=5)
        except LabkitError as exc:  # the request failed, or its stream never ended (no final flag)
            raise NotYet(f"for N={n}: {str(exc).splitlines()[0]}", rule="failed") from None
        for response in responses:
            require_configured_outputs(server, MODEL, response, shown=f" (a response for N={n})")
        values = [int(r["OUT"][0]) for r in responses]
        wanted = list(range(n, 0, -1))
        if values != wanted:
            raise NotYet(
                f"for N={n} the stream carried {values}; expected {wanted}"
                f"{' (no response at all for N=0, only the final flag)' if n == 0 else ''}.",
                rule="values",
            )


TICKER = "ticker"
LONG_STREAM = 250  # responses 20 ms apart: 5 s of work, unless the model stops when cancelled
AFTER_CANCEL_S = 2.0  # a model that stopped frees its one instance well within this


def _cancel_a_long_stream(server: TritonServer) -> None:
    """Start a stream of LONG_STREAM responses, read three, then cancel it (tritonclient's own stream)."""
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        n = grpcclient.InferInput("N", [1], "INT32")
        n.set_data_from_numpy(np.array([LONG_STREAM], np.int32))
        client.async_stream_infer(TICKER, [n])
        for read in range(3):
            try:
                result, error = answers.get(timeout=5)
            except queue.Empty:
                raise NotYet(
                    f"for N={LONG_STREAM} the stream brought {read} response(s) in 5 s, not 3.", rule="failed"
                ) from None
            if error is not None:
                raise NotYet(f"for N={LONG_STREAM}: {error}", rule="failed")
        client.stop_stream(cancel_requests=True)
    finally:
        client.close()


@exercise("15-cancel-stream", sources=(TICKER,))
def cancel_stream(server: TritonServer) -> None:
    try:
        got = [int(r["OUT"][0]) for r in stream_infer(server, TICKER, {"N": np.array([3], np.int32)}, timeout_s=5)]
    except LabkitError as exc:
        raise NotYet(f"for N=3: {str(exc).splitlines()[0]}", rule="failed") from None
    if got != [1, 2, 3]:
        raise NotYet(f"for N=3 the stream carried {got}; expected [1, 2, 3].", rule="values")
    _cancel_a_long_stream(server)
    try:  # the model has one instance: the next request waits until the cancelled one's execute returns
        after = stream_infer(server, TICKER, {"N": np.array([2], np.int32)}, timeout_s=AFTER_CANCEL_S)
    except LabkitError:
        raise NotYet(
            f"after the client cancelled a stream of {LONG_STREAM} responses (20 ms apart), the model went on: a "
            f"request sent next got no answer within {AFTER_CANCEL_S:.0f} s, its instance still busy with the "
            "cancelled one.",
            rule="kept-going",
        ) from None
    if [int(r["OUT"][0]) for r in after] != [1, 2]:
        raise NotYet(f"after a cancelled stream, N=2 brought {[int(r['OUT'][0]) for r in after]}.", rule="values")
