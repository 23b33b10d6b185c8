"""Exercises of notebook 15: a decoupled countdown answered in C++ through a response factory, and a batch of
Python streams one of which its client cancels. The checks stream their own requests over gRPC to the
models the notebook serves (``streams.Stream``: one stream a request, each response as the client got it)."""

from __future__ import annotations

import time

import numpy as np

from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs
from .streams import Stream

BACKEND, MODEL = "countdowncpp", "countdown_cpp"
LONG_COUNT, SHORT_COUNT = 50, 3  # 20 ms of work a response: 1 s for the long stream, 60 ms for the short one
COUNT_TIMEOUT_S = 5.0


def _count(server: TritonServer, n: int) -> Stream:
    return Stream(server, MODEL, {"N": np.array([n], np.int32)})


def _values(stream: Stream) -> list[int | None]:
    return [r.value("OUT") for r in stream.replies if r.outputs]


def _countdown_to_end(server: TritonServer, stream: Stream, n: int) -> None:
    if not stream.read(COUNT_TIMEOUT_S) or stream.replies[-1].error:
        ended = stream.replies[-1].error if stream.replies and stream.replies[-1].error else "no final flag"
        raise NotYet(f"for N={n} the stream brought {_values(stream)}, then {ended}.", rule="failed")
    for reply in stream.replies:
        if reply.outputs:
            require_configured_outputs(server, MODEL, reply.outputs, shown=f" (a response for N={n})")
    if _values(stream) != list(range(n, 0, -1)):
        raise NotYet(
            f"for N={n} the stream carried {_values(stream)}; expected {list(range(n, 0, -1))}"
            f"{' (no response at all for N=0, only the final flag)' if n == 0 else ''}.",
            rule="values",
        )


@exercise("15-countdown-cpp", sources=(BACKEND, MODEL))
def countdown_cpp(server: TritonServer) -> None:
    for n in (5, 1, 0):
        with _count(server, n) as stream:
            _countdown_to_end(server, stream, n)
    # one instance: a second request is served while the first still streams only if execute returned
    with _count(server, LONG_COUNT) as long:
        if long.next(COUNT_TIMEOUT_S) is None:
            raise NotYet(f"for N={LONG_COUNT} no response came within {COUNT_TIMEOUT_S:.0f} s.", rule="failed")
        with _count(server, SHORT_COUNT) as short:
            _countdown_to_end(server, short, SHORT_COUNT)
        _countdown_to_end(server, long, LONG_COUNT)
        if short.replies[-1].at > long.replies[-1].at:
            raise NotYet(
                f"a stream of N={SHORT_COUNT}, sent after the first response of a stream of N={LONG_COUNT}, ended only "
                "after it: the one instance served them one after the other, its execute busy until the first "
                "stream's end.",
                "start a thread per request that owns the request and its factory (it sends, ends the stream and "
                "releases the request), and return from execute at once.",
                rule="one-at-a-time",
            )


TICKER = "ticker"
LONG, SHORT = 250, 30  # ticks 20 ms apart: 5 s of work for the long stream, unless the model stops when cancelled
# A round tells whether a cancel stops the others only when a short stream was ticking beside the long one and
# still had this many ticks (400 ms) to go when the client cancelled: time enough for the cancel to reach the
# model. Under load the long request can miss the short ones' batch, or the client can read late; such a round
# tells nothing, and the check batches again.
TICKS_TO_GO = 20
BATCH_ROUNDS = 3
AFTER_CANCEL_S = 2.0  # a model that stopped frees its one instance well within this
TICK_TIMEOUT_S = 5.0


def _ticks(stream: Stream) -> list[int | None]:
    return [r.value("OUT") for r in stream.replies if r.outputs]


def _read_or_fail(stream: Stream, what: str) -> None:
    if not stream.read(TICK_TIMEOUT_S):
        raise NotYet(
            f"{what}: the stream brought {_ticks(stream)} and then nothing for {TICK_TIMEOUT_S:.0f} s, no final flag.",
            rule="failed",
        )
    if stream.replies[-1].error:
        raise NotYet(f"{what}: the stream ended with an error: {stream.replies[-1].error}", rule="failed")


def _ticking_beside(stream: Stream, cancelled_at: float) -> bool:
    """Whether ``stream`` had started ticking and still had TICKS_TO_GO ticks to go when the client cancelled."""
    before = sum(1 for r in stream.replies if r.outputs and r.at < cancelled_at)
    return 0 < before <= SHORT - TICKS_TO_GO


def _batch_with_a_cancelled_stream(server: TritonServer) -> bool:
    """Two short streams and a long one, sent together (one batch: the config's queue delay gathers them);
    the long one, sent last, is cancelled after three ticks; the short ones must still run to their end.
    True when the round told something: a short stream was ticking beside the long one when it was cancelled."""
    with (
        Stream(server, TICKER, {"N": np.array([[SHORT]], np.int32)}) as first,
        Stream(server, TICKER, {"N": np.array([[SHORT]], np.int32)}) as second,
    ):
        time.sleep(0.01)  # the long request comes last in the batch: not requests[0]
        with Stream(server, TICKER, {"N": np.array([[LONG]], np.int32)}) as long:
            for _ in range(3):
                if long.next(TICK_TIMEOUT_S) is None or long.replies[-1].error:
                    raise NotYet(
                        f"for N={LONG} the stream brought {_ticks(long)} in {TICK_TIMEOUT_S:.0f} s, not three ticks.",
                        rule="failed",
                    )
            cancelled_at = time.monotonic()
            long.cancel()
            for stream in (first, second):
                if (
                    not stream.read(TICK_TIMEOUT_S)
                    or stream.replies[-1].error
                    or _ticks(stream) != list(range(1, SHORT + 1))
                ):
                    raise NotYet(
                        f"three streams went in one batch (N={SHORT}, {SHORT} and {LONG}); when the client cancelled the "
                        f"N={LONG} one, a stream of N={SHORT} in the same batch brought {_ticks(stream)}"
                        f"{'' if stream.ended else ' and no final flag'}; expected 1 to {SHORT}: only the cancelled "
                        "request stops.",
                        "ask each request of the batch, request.is_cancelled(), and close only that one's stream.",
                        rule="others-stopped",
                    )
            return _ticking_beside(first, cancelled_at) or _ticking_beside(second, cancelled_at)


def _next_request_served(server: TritonServer) -> None:
    """The model has one instance: the next request waits until the cancelled one's execute returns."""
    with Stream(server, TICKER, {"N": np.array([[2]], np.int32)}) as after:
        if not after.read(AFTER_CANCEL_S):
            raise NotYet(
                f"after the client cancelled a stream of {LONG} ticks (20 ms apart) in a batch with two short ones, "
                f"the model went on: a request sent once the short ones had ended got no answer within "
                f"{AFTER_CANCEL_S:.0f} s, its one instance still busy with the cancelled request.",
                "ask every request of the batch before each tick, not only the first.",
                rule="kept-going",
            )
        if _ticks(after) != [1, 2]:
            raise NotYet(f"after a cancelled stream, N=2 brought {_ticks(after)}.", rule="values")


@exercise("15-cancel-stream", sources=(TICKER,))
def cancel_stream(server: TritonServer) -> None:
    with Stream(server, TICKER, {"N": np.array([[3]], np.int32)}) as alone:
        _read_or_fail(alone, "for N=3")
        if _ticks(alone) != [1, 2, 3]:
            raise NotYet(f"for N=3 the stream carried {_ticks(alone)}; expected [1, 2, 3].", rule="values")
    for _ in range(BATCH_ROUNDS):  # a round that told nothing (see TICKS_TO_GO) is tried again
        told = _batch_with_a_cancelled_stream(server)
        _next_request_served(server)
        if told:
            return
