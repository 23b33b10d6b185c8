"""Exercises of notebook 03 (dynamic batching): choose a queue delay, and a preferred batch size.

Both are measured on a model of the check's own (a copy of ``minimal_batching``), so the notebook's
models keep their settings; the numbers vary between machines, the bounds hold on all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import reference
from ..load import run_load
from ..native import deploy
from ..repository import ModelRepository
from ..server.base import TritonServer
from ..stats import model_stats
from .core import NotYet, exercise

DELAY_CLIENTS, DELAY_MIN_BATCH, DELAY_MAX_P50_MS = 6, 4.0, 10.0
PREFERRED_CLIENTS, PREFERRED_MAX_BATCH, PREFERRED_MIN_AVERAGE = 8, 4, 2.0


def _measure(server: TritonServer, model: str, clients: int, requests: int, **batching: object) -> tuple[dict, float]:
    """Serve ``model`` as minimal_batching with these dynamic-batching settings, put the load on it,
    and return (batch size -> executions, p50 latency in ms)."""
    config = ModelRepository(reference.repository()).read_config("minimal_batching")
    config.name = model
    config.dynamic_batching.max_queue_delay_microseconds = int(batching["delay_us"])
    config.dynamic_batching.preferred_batch_size[:] = list(batching.get("preferred", ()))
    config.instance_group[0].count = 1
    server.repository.write_config(config)
    deploy.load_models(server, [model])  # the minimal backend, built if needed
    inputs = reference.sample_inputs(model, server=server)
    run_load(server, model, inputs, requests=clients * 4, concurrency=clients)  # warm-up
    before = model_stats(server, model, settle=True)
    result = run_load(server, model, inputs, requests=requests, concurrency=clients)
    if result.errors:
        raise NotYet(f"{len(result.errors)} of {requests} requests failed: {result.errors[0]}")
    moved = model_stats(server, model, settle=True).since(before)
    return moved.batch_counts, result.percentile_ms(50)


@exercise("03-delay", "03_dynamic_batching", "a queue delay that batches six clients without making them wait long",
          "too short, and each request goes before the others arrive; too long, and every request waits it out: "
          "six clients resend within a millisecond or two of their answers.")
def delay(server: TritonServer, delay_us: int) -> None:
    if not isinstance(delay_us, int) or delay_us < 0:
        raise NotYet(f"delay_us must be a whole number of microseconds, not {delay_us!r}.")
    if delay_us == 0:
        raise NotYet("with max_queue_delay_microseconds 0, Triton runs whatever is queued at once: six fast clients "
                     "rarely overlap, so batches stay small.")
    batches, p50 = _measure(server, "delay_exercise", DELAY_CLIENTS, 300, delay_us=delay_us)
    executions = sum(batches.values())
    average = sum(size * n for size, n in batches.items()) / executions if executions else 0.0
    if average < DELAY_MIN_BATCH:
        raise NotYet(f"with {delay_us} us, {DELAY_CLIENTS} clients got batches of {average:.1f} on average "
                     f"(needed: at least {DELAY_MIN_BATCH:g}).")
    if p50 >= DELAY_MAX_P50_MS:
        raise NotYet(f"with {delay_us} us the batches are full enough ({average:.1f} on average), but half the "
                     f"requests took {p50:.1f} ms or more (needed: under {DELAY_MAX_P50_MS:g} ms).")


@exercise("03-preferred", "03_dynamic_batching", "a preferred batch size that keeps batches small but batched",
          "preferred_batch_size lists the sizes Triton sends as soon as it has them, instead of waiting for the "
          "delay or max_batch_size; a request that arrives while a batch is formed may still join it.")
def preferred(server: TritonServer, preferred: Sequence[int]) -> None:
    sizes = list(preferred)
    if not all(isinstance(s, int) and 1 <= s <= 8 for s in sizes):
        raise NotYet(f"preferred must be a list of batch sizes from 1 to 8 (max_batch_size), not {preferred!r}.")
    if not sizes:
        raise NotYet("with no preferred size, eight clients and a 10 ms delay fill batches to max_batch_size (8).")
    batches, _ = _measure(server, "preferred_exercise", PREFERRED_CLIENTS, 400, delay_us=10_000, preferred=sizes)
    shown = "{" + ", ".join(f"{size}: {n}" for size, n in sorted(batches.items())) + "}"
    executions = sum(batches.values())
    average = sum(size * n for size, n in batches.items()) / executions if executions else 0.0
    if max(batches, default=0) > PREFERRED_MAX_BATCH:
        raise NotYet(f"with preferred {sizes}, Triton formed batches up to {max(batches)} (executions per size: "
                     f"{shown}); none should hold more than {PREFERRED_MAX_BATCH}.")
    if average < PREFERRED_MIN_AVERAGE:
        raise NotYet(f"with preferred {sizes}, batches are small ({shown}) but hardly batches at all: "
                     f"{average:.1f} requests on average (needed: at least {PREFERRED_MIN_AVERAGE:g}).")
