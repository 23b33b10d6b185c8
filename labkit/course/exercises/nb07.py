"""Exercises of notebook 07 (the rest of the backend API): a BLS model whose calls depend on what the
called model answers, and a decoupled countdown."""

from __future__ import annotations

import numpy as np

from ...client.inference import infer, stream_infer
from ...errors import InferenceError
from ...observe.stats import model_stats
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs

COUNTDOWN = "countdown"
DOUBLING, ADD_SUB = "doubling", "add_sub"
#: Inputs of the BLS check (no 0: a 0 never grows), and the most add_sub calls one of them needs.
DOUBLING_INPUTS = ([1, 2, 3, 4], [-50, 60, 200, 99], [100, -100, 250, 1000], [0.75, -3, 40, 7])


def doubled(x: np.ndarray) -> tuple[np.ndarray, int]:
    """What the doubling model answers: ``x`` doubled until every value's magnitude reaches 100, and how often."""
    calls = 0
    while np.abs(x).min() < 100:
        x, calls = x + x, calls + 1
    return x, calls


@exercise("07-countdown", sources=(COUNTDOWN,))
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
