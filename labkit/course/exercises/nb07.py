"""Exercises of notebook 07 (the rest of the backend API): a BLS model whose calls depend on what the
called model answers, and a decoupled model whose number of responses depends on its input, whose last
response carries data and the final flag together, and which answers a bad input with an error. The
decoupled check reads its own gRPC streams (``streams.Stream``): what each response carried and which one
was final, as a client sees them."""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError
from ...observe.stats import model_stats
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs
from .streams import Reply, Stream

COLLATZ = "collatz"
#: Inputs of the collatz check: sequences of 9, 1 and 112 values, then a bad input, then one after it.
COLLATZ_INPUTS = (6, 1, 27, 0, 3)
STREAM_TIMEOUT_S = 5.0
DOUBLING, ADD_SUB = "doubling", "add_sub"
#: Inputs of the BLS check (no 0: a 0 never grows), and the most add_sub calls one of them needs.
DOUBLING_INPUTS = ([1, 2, 3, 4], [-50, 60, 200, 99], [100, -100, 250, 1000], [0.75, -3, 40, 7])


def doubled(x: np.ndarray) -> tuple[np.ndarray, int]:
    """What the doubling model answers: ``x`` doubled until every value's magnitude reaches 100, and how often."""
    calls = 0
    while np.abs(x).min() < 100:
        x, calls = x + x, calls + 1
    return x, calls


def collatz(n: int) -> list[int]:
    """The Collatz sequence from ``n`` (at least 1) to 1: halve an even number, triple an odd one and add 1."""
    values = [n]
    while values[-1] != 1:
        values.append(values[-1] // 2 if values[-1] % 2 == 0 else 3 * values[-1] + 1)
    return values


def _collatz_stream(server: TritonServer, n: int) -> list[Reply]:
    with Stream(server, COLLATZ, {"N": np.array([n], np.int32)}) as stream:
        if not stream.read(STREAM_TIMEOUT_S):
            raise NotYet(
                f"for N={n} the stream brought {len(stream.replies)} response(s) and then nothing for "
                f"{STREAM_TIMEOUT_S:.0f} s: no final flag.",
                "every request ends with exactly one response sent with flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL.",
                rule="failed",
            )
        return stream.replies


def _judge_sequence(server: TritonServer, n: int, replies: list[Reply]) -> None:
    errors = [r.error for r in replies if r.error]
    if errors:
        raise NotYet(f"for N={n} the stream brought an error: {errors[0].splitlines()[0]}", rule="failed")
    wanted = collatz(n)
    values = [r.value("VALUE") for r in replies if r.outputs]
    if values != wanted:
        raise NotYet(f"for N={n} the responses' VALUE were {values}; expected {wanted}.", rule="values")
    for reply in replies:  # a response carries some of the configured outputs: each as configured
        for name, got in reply.outputs.items():
            if got.dtype != np.int32 or got.shape != (1,):
                raise NotYet(
                    f"for N={n} a response's {name} came back as {got.dtype} of shape {list(got.shape)}; its "
                    "config says INT32 [1].",
                    "give pb_utils.Tensor an array of dtype np.int32 holding one value.",
                    rule="values",
                )
    last = replies[-1]
    if not last.outputs:
        raise NotYet(
            f"for N={n} the final flag came alone, in a response of its own after the last value: the client "
            "gets one response more than there are values, an empty one.",
            "send the last response with the flag: sender.send(response, flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL).",
            rule="empty-final",
        )
    steps = [r.value("STEPS") for r in replies]
    if steps[-1] != len(wanted) - 1 or any(s is not None for s in steps[:-1]):
        raise NotYet(
            f"for N={n} STEPS came as {steps} (response by response, None where a response had none); expected "
            f"{len(wanted) - 1}, on the last response only.",
            "a response carries the outputs it is given: the last one gets VALUE and STEPS, the others VALUE alone.",
            rule="steps",
        )
    require_configured_outputs(server, COLLATZ, last.outputs, shown=f" (the last response for N={n})")


@exercise("07-countdown", sources=(COLLATZ,))
def countdown(server: TritonServer) -> None:
    for n in COLLATZ_INPUTS:
        replies = _collatz_stream(server, n)
        if n >= 1:
            _judge_sequence(server, n, replies)
            continue
        if len(replies) != 1 or not replies[0].error:
            shown = [r.value("VALUE") if r.outputs else ("error" if r.error else "empty") for r in replies]
            raise NotYet(
                f"for N={n} the stream brought {shown}; expected one response carrying an error, and nothing else.",
                "a bad input gets one response made with error=pb_utils.TritonError(...), sent with the final flag.",
                rule="error",
            )


@exercise("07-bls-loop", sources=(DOUBLING,))
def bls_loop(server: TritonServer) -> None:
    for values in DOUBLING_INPUTS:
        x = np.array(values, np.float32)
        want_y, want_calls = doubled(x)
        before = model_stats(server, ADD_SUB, settle=True).success_count
        try:
            outputs = infer(server, DOUBLING, {"X": x}, timeout_s=10)
        except InferenceError as exc:
            raise NotYet(f"for X={values}: {str(exc).splitlines()[0]}", rule="failed") from None
        require_configured_outputs(server, DOUBLING, outputs, shown=f" (for X={values})")
        calls = model_stats(server, ADD_SUB, settle=True).success_count - before
        y, said = outputs["Y"], int(outputs["CALLS"][0])
        if not np.allclose(y, want_y):
            raise NotYet(
                f"for X={values} Y was {y.tolist()}; expected {want_y.tolist()} (X doubled {want_calls} times, until "
                "every value's magnitude is at least 100).",
                rule="values",
            )
        if calls != want_calls:
            raise NotYet(
                f"for X={values} Y is right, but add_sub's statistics counted {calls} request(s) from it, not "
                f"{want_calls}: each doubling must be one call to add_sub.",
                rule="calls",
            )
        if said != calls:
            raise NotYet(f"for X={values} CALLS said {said}; add_sub counted {calls}.", rule="count")
