"""Exercises of notebook 03 (dynamic batching): choose a queue delay, and a preferred batch size.

Both are measured on a model of the check's own (a copy of ``minimal_batching``, removed afterwards),
so the notebook's models keep their settings.

03-delay puts six closed-loop clients on it; the numbers vary between machines, the bounds hold on all.
03-preferred is deterministic: under concurrent load, a request that arrives while Triton hands a batch
to the model may still join it (a preferred size of 4 gave batches of 5 in about one run in two), so
the check instead sends requests one after another, each only once Triton has queued the previous
ones, with a delay too long to end a batch: only preferred sizes and max_batch_size end one.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from collections.abc import Sequence

import numpy as np

from .. import reference
from ..inference import infer
from ..load import run_load
from ..native import deploy
from ..native.build import reference_source
from ..repository import ModelRepository
from ..server.base import TritonServer
from ..stats import metric, model_stats, parse_metrics
from ..transport import closing_http
from .core import NotYet, exercise
from .scratch import owned_model

DELAY_CLIENTS, DELAY_MIN_BATCH, DELAY_MAX_P50_MS = 6, 4.0, 10.0
PREFERRED_REQUESTS, PREFERRED_MAX_BATCH, PREFERRED_MIN_AVERAGE = 24, 4, 2.0
PREFERRED_DELAY_US = 2_000_000  # longer than feeding a batch takes: only sizes end a batch in the probe


def _serve_copy(server: TritonServer, model: str, *, delay_us: int, preferred: Sequence[int] = ()) -> None:
    """Serve ``model`` as a copy of minimal_batching (max batch 8, one instance) with these settings."""
    config = ModelRepository(reference.repository()).read_config("minimal_batching")
    config.name = model
    config.dynamic_batching.max_queue_delay_microseconds = delay_us
    config.dynamic_batching.preferred_batch_size[:] = list(preferred)
    config.instance_group[0].count = 1
    server.repository.write_config(config)
    build = server.models.build(config.backend, reference_source(config.backend), progress=False)
    deploy.install(server.models, build, model)


def _batches(moved: dict) -> str:
    return "{" + ", ".join(f"{size}: {n}" for size, n in sorted(moved.items())) + "}"


def _average(batches: dict) -> float:
    executions = sum(batches.values())
    return sum(size * n for size, n in batches.items()) / executions if executions else 0.0


def _whole_microseconds(value: object) -> int:
    """``value`` as a whole number of microseconds: any integral number (int, numpy integer, 2000.0);
    NotYet for anything else, saying what is wrong."""
    if isinstance(value, (bool, np.bool_)):
        raise NotYet(f"delay_us is {value!r}, a truth value; give a number of microseconds, e.g. 2000.")
    if not isinstance(value, numbers.Real):
        raise NotYet(f"delay_us must be a number of microseconds, not {type(value).__name__} {value!r}.")
    if not math.isfinite(float(value)) or float(value) != int(value):
        raise NotYet(f"delay_us is {value!r}; Triton takes a whole number of microseconds.")
    whole = int(value)
    if whole < 0:
        raise NotYet(f"delay_us is {whole}; a delay cannot be negative.")
    return whole


@exercise("03-delay", "03_dynamic_batching", "a queue delay that batches six clients without making them wait long",
          "too short, and each request goes before the others arrive; too long, and every request waits it out: "
          "six clients resend within a millisecond or two of their answers.")
def delay(server: TritonServer, delay_us: object) -> None:
    delay_us = _whole_microseconds(delay_us)
    if delay_us == 0:
        raise NotYet("with max_queue_delay_microseconds 0, Triton runs whatever is queued at once: six fast clients "
                     "rarely overlap, so batches stay small.")
    with owned_model(server, "delay_exercise") as model:
        _serve_copy(server, model, delay_us=delay_us)
        inputs = reference.sample_inputs(model, server=server)
        run_load(server, model, inputs, requests=DELAY_CLIENTS * 4, concurrency=DELAY_CLIENTS)  # warm-up
        before = model_stats(server, model, settle=True)
        result = run_load(server, model, inputs, requests=300, concurrency=DELAY_CLIENTS)
        if result.errors:
            raise NotYet(f"{len(result.errors)} of 300 requests failed: {result.errors[0].message}")
        batches = model_stats(server, model, settle=True).since(before).batch_counts
    average, p50 = _average(batches), result.percentile_ms(50)
    if average < DELAY_MIN_BATCH:
        raise NotYet(f"with {delay_us} us, {DELAY_CLIENTS} clients got batches of {average:.1f} on average "
                     f"(needed: at least {DELAY_MIN_BATCH:g}).")
    if p50 >= DELAY_MAX_P50_MS:
        raise NotYet(f"with {delay_us} us the batches are full enough ({average:.1f} on average), but half the "
                     f"requests took {p50:.1f} ms or more (needed: under {DELAY_MAX_P50_MS:g} ms).")


def _pending(server: TritonServer, model: str) -> int:
    return int(metric(parse_metrics(server.models.metrics_text()), "nv_inference_pending_request_count", model=model))


def _one_after_another(server: TritonServer, model: str, count: int, timeout_s: float = 60.0) -> None:
    """Send ``count`` requests, each in its own thread, the next only once every earlier one is
    queued in Triton or answered: no request can arrive while a batch is being handed over."""
    inputs = reference.sample_inputs(model, server=server)
    answered: list[int] = []
    failures: list[BaseException] = []

    def send(index: int) -> None:
        try:
            infer(server, model, inputs)
            answered.append(index)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's thread
            failures.append(exc)

    threads = []
    deadline = time.monotonic() + timeout_s
    for index in range(count):
        threads.append(threading.Thread(target=closing_http(send), args=(index,), name=f"labkit-preferred-{index}"))
        threads[-1].start()
        while not failures and _pending(server, model) + len(answered) < index + 1:
            if time.monotonic() > deadline:
                raise NotYet(f"request {index + 1} of {count} was neither queued nor answered after {timeout_s:g} s.")
            time.sleep(0.002)
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


@exercise("03-preferred", "03_dynamic_batching", "a preferred batch size that keeps batches small but batched",
          "preferred_batch_size lists the sizes Triton sends as soon as it has them, instead of waiting for the "
          "delay or max_batch_size; a request that arrives while a batch is formed may still join it.")
def preferred(server: TritonServer, preferred: Sequence[int]) -> None:
    try:
        sizes = [int(s) for s in preferred if isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_))]
    except TypeError:
        sizes = []
    if isinstance(preferred, (str, bytes)) or sizes != list(preferred) or not all(1 <= s <= 8 for s in sizes):
        raise NotYet(f"preferred must be a list of batch sizes from 1 to 8 (max_batch_size), not {preferred!r}.")
    if not sizes:
        raise NotYet("with no preferred size, eight clients and a 10 ms delay fill batches to max_batch_size (8).")
    with owned_model(server, "preferred_exercise") as model:
        _serve_copy(server, model, delay_us=PREFERRED_DELAY_US, preferred=sizes)
        before = model_stats(server, model, settle=True)
        _one_after_another(server, model, PREFERRED_REQUESTS)
        batches = model_stats(server, model, settle=True).since(before).batch_counts
    average = _average(batches)
    if max(batches, default=0) > PREFERRED_MAX_BATCH:
        raise NotYet(f"with preferred {sizes}, Triton formed batches up to {max(batches)} (executions per size: "
                     f"{_batches(batches)}); none should hold more than {PREFERRED_MAX_BATCH}.")
    if average < PREFERRED_MIN_AVERAGE:
        raise NotYet(f"with preferred {sizes}, batches are small ({_batches(batches)}) but hardly batches at all: "
                     f"{average:.1f} requests on average (needed: at least {PREFERRED_MIN_AVERAGE:g}).")
