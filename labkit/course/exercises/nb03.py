"""Exercises of notebook 03 (dynamic batching): choose a queue delay, and a preferred batch size.

Both are measured on a model of the check's own (a copy of ``minimal_batching`` for the delay, of
``add_sub_batching`` for the preferred size; removed afterwards), so the notebook's models keep their
settings.

03-delay puts six closed-loop clients on it; the numbers vary between machines, the bounds hold on all.

03-preferred puts the load of the lesson's section 5 on it (eight clients, a 10 ms queue delay) in a few
rounds, reloading the copy between them. Under that load Triton 23.12 now and then forms a batch one
request larger than the largest preferred size (a request that arrives while a batch waits for the
model joins it: [4] gave batches of 5 in 28 of 30 runs of 600 requests), so [4] fails, and [3] gives
batches of 3 and 4 (in 30 runs one had no batch of 4: hence the rounds). The answer must also let
batches reach 4: [2] or [1, 2], whose batches stop at 3, are not enough. When the queue delay runs out
(the machine stalls for more than 10 ms) Triton sends whatever is queued, up to max_batch_size, whatever
the preferred sizes: such batches are not counted. The copy's model.py (stub_side/batch_waits.py)
reports, per execute(), how many requests it held and how long the oldest had waited since the client
built it, which is at least its time in Triton's queue: a batch whose every request waited less than
the delay was not sent because the delay ran out.
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import SupportsInt, cast

import numpy as np

from ...errors import WaitTimeoutError
from ...native import deploy
from ...native.build import reference_source
from ...observe.stats import model_stats
from ...plumbing.polling import wait_until
from ...repository import ModelRepository
from ...server.base import TritonServer
from ...traffic.generator import run_load
from .. import reference
from . import model_side as stub_side
from .core import NotYet, exercise
from .scratch import owned_model

DELAY_CLIENTS, DELAY_MIN_BATCH, DELAY_MAX_P50_MS = 6, 4.0, 10.0
#: 03-preferred: the load of section 5 (eight clients, a 10 ms delay), PREFERRED_ROUNDS times over.
PREFERRED_CLIENTS, PREFERRED_DELAY_US, PREFERRED_REQUESTS, PREFERRED_ROUNDS = 8, 10_000, 600, 4
PREFERRED_MAX_BATCH = 4
PREFERRED_TIMEOUT_S = 20.0


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
    # typeshed's numbers.Real lacks __int__; every concrete Real (int, float, Fraction, numpy scalars) has it
    number = cast(SupportsInt, value)
    if not math.isfinite(float(value)) or float(value) != int(number):
        raise NotYet(f"delay_us is {value!r}; Triton takes a whole number of microseconds.")
    whole = int(number)
    if whole < 0:
        raise NotYet(f"delay_us is {whole}; a delay cannot be negative.")
    return whole


@exercise("03-delay")
def delay(server: TritonServer, delay_us: object) -> None:
    delay_us = _whole_microseconds(delay_us)
    if delay_us == 0:
        raise NotYet(
            "with max_queue_delay_microseconds 0, Triton runs whatever is queued at once: six fast clients "
            "rarely overlap, so batches stay small."
        )
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
        raise NotYet(
            f"with {delay_us} us, {DELAY_CLIENTS} clients got batches of {average:.1f} on average "
            f"(needed: at least {DELAY_MIN_BATCH:g})."
        )
    if p50 >= DELAY_MAX_P50_MS:
        raise NotYet(
            f"with {delay_us} us the batches are full enough ({average:.1f} on average), but half the "
            f"requests took {p50:.1f} ms or more (needed: under {DELAY_MAX_P50_MS:g} ms)."
        )


def _serve_waits_copy(server: TritonServer, model: str, preferred: Sequence[int]) -> None:
    """Serve ``model``: add_sub_batching's config (max batch 8, one instance) with the lesson's delay and
    ``preferred``, and a model.py that reports every execute() in report.jsonl."""
    config = ModelRepository(reference.repository()).read_config("add_sub_batching")
    config.name = model
    config.dynamic_batching.max_queue_delay_microseconds = PREFERRED_DELAY_US
    config.dynamic_batching.preferred_batch_size[:] = list(preferred)
    del config.instance_group[1:]
    config.instance_group[0].count = 1
    server.repository.write_config(config)
    server.repository.write_file(model, "model.py", stub_side.source("batch_waits"))


def _stamped(index: int) -> dict[str, np.ndarray]:
    """One request whose INPUT0 carries the moment it is built (see stub_side/batch_waits.py)."""
    now = time.monotonic()
    whole = float(math.floor(now))
    return {
        "INPUT0": np.array([[whole, now - whole, 0.0, float(index % 100)]], np.float32),
        "INPUT1": np.ones((1, 4), np.float32),
    }


def _reported(report: Path, skip: int, requests: int) -> list[dict]:
    """The executions the model reported after its first ``skip`` lines, once they account for ``requests``
    (the last execute's line may land a moment after its responses), or all there are after 5 s."""
    lines: list[str] = []

    def complete() -> bool:
        lines[:] = report.read_text().splitlines()[skip:] if report.exists() else []
        return sum(json.loads(line)["requests"] for line in lines) >= requests

    try:
        wait_until(complete, 5, "the model's report of every request", interval_s=0.05)
    except WaitTimeoutError:
        pass  # judged on the lines there are: the check says what is missing
    return [json.loads(line) for line in lines]


def _round(server: TritonServer, model: str) -> list[dict]:
    """Load ``model`` afresh, warm it up, put the lesson's load on it; the executions it reported."""
    report = server.repository.model_dir(model) / "report.jsonl"
    server.repository.mark_changed(model)
    server.load(model)
    skip = len(report.read_text().splitlines()) if report.exists() else 0
    run_load(server, model, _stamped, requests=2 * PREFERRED_CLIENTS, concurrency=PREFERRED_CLIENTS)  # warm-up
    skip += len(_reported(report, skip, 2 * PREFERRED_CLIENTS))
    result = run_load(
        server,
        model,
        _stamped,
        requests=PREFERRED_REQUESTS,
        concurrency=PREFERRED_CLIENTS,
        timeout_s=PREFERRED_TIMEOUT_S,
    )
    if result.errors:
        raise NotYet(
            f"{len(result.errors)} of {PREFERRED_REQUESTS} requests failed: {result.errors[0].message}", rule="failed"
        )
    return _reported(report, skip, PREFERRED_REQUESTS)


def _sizes(sizes: object) -> list[int]:
    """The answer as a list of batch sizes (NotYet unless it is a list or tuple of whole numbers 1-8)."""
    try:
        items = list(sizes)  # type: ignore[call-overload]
    except TypeError:
        items = None
    whole = [int(s) for s in items or [] if isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_))]
    if isinstance(sizes, (str, bytes)) or items is None or whole != items or not all(1 <= s <= 8 for s in whole):
        raise NotYet(
            f"preferred must be a list of batch sizes from 1 to 8 (max_batch_size), not {sizes!r}.", rule="not-sizes"
        )
    return whole


@exercise("03-preferred")
def preferred(server: TritonServer, preferred: Sequence[int]) -> None:
    sizes = _sizes(preferred)
    if not sizes:
        raise NotYet(
            "with no preferred size, eight clients and a 10 ms delay fill batches to max_batch_size (8).",
            rule="too-large",
        )
    executions: list[dict] = []
    with owned_model(server, "preferred_exercise") as model:
        _serve_waits_copy(server, model, sizes)
        for number in range(1, PREFERRED_ROUNDS + 1):
            ran = _round(server, model)
            executions += ran
            early = [
                e for e in ran if e["requests"] > PREFERRED_MAX_BATCH and e["waited_ms"] < PREFERRED_DELAY_US / 1000
            ]
            if early:
                batches = Counter(e["requests"] for e in ran)
                raise NotYet(
                    f"with preferred {sizes}, eight clients and a 10 ms delay, Triton formed "
                    f"{len(early)} batch(es) of more than {PREFERRED_MAX_BATCH} before the delay ran out "
                    f"(round {number} of {PREFERRED_ROUNDS}, executions per size: {_batches(batches)}); "
                    f"none should.",
                    rule="too-large",
                )
    before_delay = [e["requests"] for e in executions if e["waited_ms"] < PREFERRED_DELAY_US / 1000]
    if max(before_delay, default=0) < PREFERRED_MAX_BATCH:
        raise NotYet(
            f"with preferred {sizes}, no batch held more than {max(before_delay, default=0)} requests in "
            f"{PREFERRED_ROUNDS} rounds (executions per size: {_batches(Counter(before_delay))}): batches may "
            f"grow to {PREFERRED_MAX_BATCH}, and should.",
            rule="too-small",
        )
