"""Exercises of notebook 03 (dynamic batching): choose a queue delay, and write a batching model's
config.pbtxt from nothing.

03-delay is measured on a copy of ``minimal_batching`` of the check's own (removed afterwards), so the
notebook's model keeps its settings; six closed-loop clients on it; the numbers vary between machines,
the bounds hold on all.

03-preferred judges the config the person wrote for ``batched_add_sub`` (the lesson's add_sub model.py) by
what Triton does with it, and only by what Triton documents (common r23.12
protobuf/model_config.proto): ``max_batch_size`` is the largest batch a request may carry (lines
1887-1904: a request of 8 rows is answered, one of 9 refused); "if a batch of one of these
[preferred] sizes can be formed it will be executed immediately" (lines 1106-1113: four requests sent
together run as one batch of 4, without waiting out the delay); ``max_queue_delay_microseconds`` is how
long a request waits in the queue for others (lines 1115-1121: a lone request waits it out, and two sent
together run as one batch after it). Nothing is measured under load: how far 23.12 lets a batch grow past a
preferred size while it waits for a busy instance is not documented, so it is not judged.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import SupportsInt, cast

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError, ModelLoadError
from ...native import deploy
from ...native.build import reference_source
from ...observe.stats import ModelStats, model_stats
from ...repository import ModelRepository
from ...server.base import TritonServer
from ...traffic.generator import run_load
from .. import reference
from .core import NotYet, exercise, require_configured_outputs
from .scratch import owned_model

DELAY_CLIENTS, DELAY_MIN_BATCH, DELAY_MAX_P50_MS = 6, 4.0, 10.0
#: 03-preferred: the model the person configures, and what its config must give it.
BATCHED, ROWS, MAX_BATCH, PREFERRED, DELAY_US = "batched_add_sub", 4, 8, 4, 50_000
#: A batch that went "at once" waited well under the delay; one that waited for company, at least most of it
#: (Triton waits the whole delay: core r23.12 src/dynamic_batch_scheduler.cc:590-622); a request that waited ten
#: times the delay met a delay far longer than asked.
AT_ONCE_MS, WAITED_MS, TOO_LONG_MS = DELAY_US / 2000, 0.9 * DELAY_US / 1000, 10 * DELAY_US / 1000


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


def _pair(rows: int, seed: int) -> dict[str, np.ndarray]:
    values = np.random.default_rng(seed).uniform(-100, 100, (2, rows, ROWS)).round(2).astype(np.float32)
    return {"INPUT0": values[0], "INPUT1": values[1]}


def _load(server: TritonServer) -> None:
    """Load the config the person wrote last (the cell only writes it while the model is not loaded)."""
    try:
        server.repository.mark_changed(BATCHED)
        server.load(BATCHED)
    except ModelLoadError as exc:
        reason = (exc.reason or str(exc)).strip().splitlines()[0][:300]
        raise NotYet(
            f"Triton does not load {BATCHED!r} with your config.pbtxt: {reason}",
            "every input and output needs its data_type and dims (the dims of one row: the batch dimension is "
            "max_batch_size's, not written), named as model.py names them (model configuration, r23.12: "
            "https://github.com/triton-inference-server/server/blob/r23.12/docs/user_guide/model_configuration.md"
            "#inputs-and-outputs).",
            rule="not-loaded",
        ) from None


def _rows(server: TritonServer) -> None:
    """A request of MAX_BATCH rows is answered right; one of MAX_BATCH + 1 is refused."""
    sent = _pair(MAX_BATCH, seed=3)
    try:
        got = infer(server, BATCHED, sent, timeout_s=10)
    except InferenceError as exc:
        raise NotYet(
            f"a request of {MAX_BATCH} rows of {ROWS} FP32 values was refused: {str(exc).splitlines()[0]}",
            f"max_batch_size is the most rows one request may carry ({MAX_BATCH} here), and dims the shape of "
            f"one row ([{ROWS}]); the inputs are FP32 (TYPE_FP32).",
            rule="refused",
        ) from None
    wanted = {"OUTPUT0": sent["INPUT0"] + sent["INPUT1"], "OUTPUT1": sent["INPUT0"] - sent["INPUT1"]}
    for name, value in wanted.items():
        out = got.get(name)
        if out is None or out.dtype != np.float32 or out.shape != value.shape or not np.allclose(out, value):
            shown = "missing" if out is None else f"{out.dtype} of shape {list(out.shape)}"
            raise NotYet(
                f"for {MAX_BATCH} rows, {name} came back {shown}; expected FP32 of shape {list(value.shape)}, "
                f"{'INPUT0 + INPUT1' if name == 'OUTPUT0' else 'INPUT0 - INPUT1'}.",
                "the outputs are FP32 with the dims of one row, like the inputs.",
                rule="outputs",
            )
    try:  # what came back must be what the config declares: clients read it from the model's metadata
        require_configured_outputs(server, BATCHED, got, rows=MAX_BATCH, shown=f" (for {MAX_BATCH} rows)")
    except NotYet as exc:
        raise NotYet(
            exc.problem, f"declare the outputs as model.py returns them: TYPE_FP32, dims [{ROWS}].", rule="outputs"
        ) from None
    try:
        infer(server, BATCHED, _pair(MAX_BATCH + 1, seed=4), timeout_s=10)
    except InferenceError:
        return
    raise NotYet(
        f"a request of {MAX_BATCH + 1} rows was answered: batches may hold up to {MAX_BATCH} rows, no more.",
        f"max_batch_size: {MAX_BATCH}.",
        rule="max-batch",
    )


def _together(server: TritonServer, requests: int) -> tuple[ModelStats, float]:
    """Send ``requests`` one-row requests at once; Triton's count of the batches they ran in, and the
    milliseconds each waited in the queue on average."""
    before = model_stats(server, BATCHED, settle=True)
    result = run_load(server, BATCHED, _pair(1, seed=requests), requests=requests, concurrency=requests, timeout_s=10)
    if result.errors:
        raise NotYet(f"{len(result.errors)} of {requests} requests failed: {result.errors[0].message}", rule="refused")
    ran = model_stats(server, BATCHED, settle=True).since(before)
    return ran, ran.phase_ns.get("queue", 0) / 1e6 / max(ran.success_count, 1)


def _shown(ran: ModelStats) -> str:
    return ", ".join(f"{n} batch(es) of {size}" for size, n in sorted(ran.batch_counts.items())) or "no batch"


def _delay(server: TritonServer) -> None:
    """A lone request waits the delay for company, then goes alone."""
    _, waited = _together(server, 1)
    if waited < WAITED_MS:
        raise NotYet(
            f"a lone request waited {waited:.1f} ms in the queue; expected {DELAY_US // 1000} ms, the time it may wait "
            "for company (or is 1 a preferred size? then it goes at once).",
            f"max_queue_delay_microseconds counts microseconds: {DELAY_US // 1000} ms is {DELAY_US}.",
            rule="delay-short",
        )
    if waited >= TOO_LONG_MS:
        raise NotYet(
            f"a lone request waited {waited:.0f} ms in the queue for company; expected {DELAY_US // 1000} ms.",
            f"max_queue_delay_microseconds counts microseconds: {DELAY_US // 1000} ms is {DELAY_US}.",
            rule="delay-long",
        )


def _batching(server: TritonServer) -> None:
    """Four requests sent together go at once, as one batch; two wait the delay, together."""
    ran, waited = _together(server, PREFERRED)
    if ran.batch_counts != {PREFERRED: 1} or waited >= AT_ONCE_MS:
        raise NotYet(
            f"{PREFERRED} requests sent together ran as {_shown(ran)}, after {waited:.0f} ms in the queue on average; "
            f"expected one batch of {PREFERRED}, sent at once (well under the {DELAY_US // 1000} ms delay).",
            "a preferred batch size is one Triton sends as soon as it can form it (model_config.proto, r23.12: "
            "preferred_batch_size); a smaller preferred size is sent first, and without one Triton waits for "
            "max_batch_size.",
            rule="preferred",
        )
    ran, waited = _together(server, 2)
    if ran.batch_counts != {2: 1} or waited < WAITED_MS:
        raise NotYet(
            f"2 requests sent together ran as {_shown(ran)} after {waited:.0f} ms in the queue on average; expected "
            f"one batch of 2, after waiting {DELAY_US // 1000} ms for company: 2 is not a size to send at once.",
            f"preferred_batch_size lists the sizes sent at once: {PREFERRED} alone here.",
            rule="preferred",
        )


@exercise("03-preferred")
def preferred(server: TritonServer) -> None:
    before = server.loaded_models()
    try:
        _load(server)
        _rows(server)
        _delay(server)
        _batching(server)
    finally:
        if BATCHED not in before and BATCHED in server.loaded_models():
            server.unload(BATCHED)  # the check loaded it: leave the server as it found it
