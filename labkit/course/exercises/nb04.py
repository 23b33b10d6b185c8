"""Exercises of notebook 04 (C++ and Python, measured): the Python work done once per batch, and C++
work per vector of a batch that holds several requests' rows.

Both checks run the person's latest code in models of their own (labkit.course.exercises.scratch): the
notebook's models and configs stay as they were.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

from ...client.inference import infer, infer_together
from ...errors import InferenceError, ModelLoadError
from ...server.base import TritonServer
from .core import NotYet, exercise
from .scratch import config_of, latest, library_files, scratch_model

VECTOR_MODEL = "python_work_batched"
PEAK_MODEL, PEAK_BACKEND = "cpp_peak", "peak"
#: Lines of model.py one more request in an execute may add (its input, its response): the 300 steps
#: are 600 lines per run, so work done once per request shows as hundreds.
LINES_PER_REQUEST = 20
#: Rows of the requests the check sends together (1 + 2 + 1 + 3), and of the one it sends alone: its
#: model's preferred batch size, so either executes as soon as those rows are queued.
ROWS = (1, 2, 1, 3)
#: The batching delay of the check's model, a fallback only: the preferred size ends the wait first.
QUEUE_DELAY_US = 5_000_000


def recurrence(x: np.ndarray, steps: int) -> np.ndarray:
    """What both `work` backends compute: ``steps`` rounds of y = 0.999 y + 0.001 x, from y = 0."""
    y = np.zeros_like(x, dtype=np.float32)
    for _ in range(steps):
        y = y * np.float32(0.999) + x * np.float32(0.001)
    return y


def _same(got: np.ndarray, x: np.ndarray, steps: int) -> bool:
    return (
        got.dtype == np.float32
        and got.shape == x.shape
        and np.allclose(got, recurrence(x, steps), rtol=1e-3, atol=1e-6)
    )


@exercise("04-vectorize", sources=(VECTOR_MODEL,))
def vectorize(server: TritonServer) -> None:
    source = server.repository.model_dir(VECTOR_MODEL) / "1" / "model.py"
    if not source.exists():
        raise NotYet(
            f"model {VECTOR_MODEL!r} has no model.py yet.",
            f"run the `%%triton_python {VECTOR_MODEL}` cell first.",
            rule="setup",
        )
    config = config_of(server, VECTOR_MODEL, "the cell that writes its config")
    # One instance, batches of exactly sum(ROWS) rows: the four requests sent together share one execute,
    # and one request of as many rows runs alone; the same work, in one request or in four.
    del config.instance_group[1:]
    for group in config.instance_group:
        group.count = 1
    config.dynamic_batching.max_queue_delay_microseconds = QUEUE_DELAY_US
    config.dynamic_batching.preferred_batch_size[:] = [sum(ROWS)]
    wrapper = resources.files(__package__).joinpath("cells", "04-vectorize.wrapper").read_text()
    files = {"1/model.py": wrapper, "1/participant.py": source.read_text()}
    rng = np.random.default_rng(4)
    sent = [rng.standard_normal((rows, 2, 128)).astype(np.float32) for rows in ROWS]
    whole = np.concatenate(sent)
    with scratch_model(server, "vectorize", config, files) as model:
        try:
            server.load(model)
        except ModelLoadError as exc:
            raise NotYet(f"model.py of {VECTOR_MODEL} does not load: {exc.reason}", rule="load") from None
        try:
            answers = [infer(server, model, {"INPUTTensor": whole})] + infer_together(
                server, model, [{"INPUTTensor": x} for x in sent]
            )
        except InferenceError as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise NotYet(
                f"requests of {', '.join(map(str, ROWS))} rows sent together, or one of {len(whole)} rows, "
                f"failed: {first}",
                rule="failed",
            ) from None
        for x, out in zip([whole, *sent], answers):
            got = out["OUTPUTTensor"]
            if not _same(got, x, 300):
                raise NotYet(
                    f"a request of {x.shape[0]} row(s) did not get the 300-step recurrence of its own input "
                    f"back (shape {list(got.shape)}, {got.dtype}).",
                    "each response holds only its request's rows, in order.",
                    rule="values",
                )
        reports = [
            json.loads(line) for line in (server.repository.model_dir(model) / "report.jsonl").read_text().splitlines()
        ]
    alone = min(reports, key=lambda r: r["requests"])
    together = max(reports, key=lambda r: r["requests"])
    if together["requests"] < 2 or alone["requests"] != 1:
        raise NotYet(
            f"Triton did not execute the requests as the check arranged (requests per execute: "
            f"{[r['requests'] for r in reports]}).",
            "run the check again.",
            rule="no-batch",
        )
    growth = (together["lines"] - alone["lines"]) / (together["requests"] - 1)
    if growth > LINES_PER_REQUEST:
        raise NotYet(
            f"the answers are right, but execute() ran {alone['lines']} lines of model.py for one request of "
            f"{len(whole)} rows and {together['lines']} for {together['requests']} requests of as many rows in all: "
            f"about {growth:.0f} more per request, so "
            f"the steps still run once per request, not once per batch.",
            rule="per-request",
        )


def peak_normalized(x: np.ndarray) -> np.ndarray:
    """What `peak` computes: each vector of the last dimension divided by its largest magnitude (zeros stay)."""
    peak = np.abs(x).max(axis=-1, keepdims=True)
    return np.where(peak > 0, x / np.where(peak > 0, peak, 1), 0).astype(np.float32)


def _peak_rows(rng: np.random.Generator, rows: int, magnitude: float) -> np.ndarray:
    """``rows`` rows of [2, 128]: vectors of very different sizes, one of them negative-peaked."""
    x = rng.standard_normal((rows, 2, 128)).astype(np.float32) * np.float32(magnitude)
    x[0, 1] *= np.float32(40.0)  # a second vector forty times the first: one peak for both is wrong
    x[0, 1, 7] = -np.abs(x[0, 1]).max() * 2  # its peak is a negative value
    return x


@exercise("04-peak", sources=(PEAK_BACKEND,))
def peak(server: TritonServer) -> None:
    build = latest(server, PEAK_BACKEND)
    config = config_of(server, PEAK_MODEL, f"the cell that configures {PEAK_MODEL}")
    # One instance, batches of exactly sum(ROWS) rows: one request alone, then four that share an execute.
    del config.instance_group[1:]
    for group in config.instance_group:
        group.count = 1
    config.dynamic_batching.max_queue_delay_microseconds = QUEUE_DELAY_US
    config.dynamic_batching.preferred_batch_size[:] = [sum(ROWS)]
    rng = np.random.default_rng(44)
    alone = _peak_rows(rng, sum(ROWS), 3.0)
    alone[2, 0] = 0.0  # a vector of zeros
    together = [_peak_rows(rng, rows, magnitude) for rows, magnitude in zip(ROWS, (1.0, 500.0, 0.01, 7.0))]
    together[3][1, 1] = 0.0
    with scratch_model(server, f"peak_{build.digest}", config, library_files(build)) as model:
        try:
            server.load(model)
        except ModelLoadError as exc:
            raise NotYet(
                f"the {PEAK_BACKEND} backend does not load: {exc.reason.strip().splitlines()[-1]}", rule="load"
            ) from None
        try:
            answers = [infer(server, model, {"INPUTTensor": alone})] + infer_together(
                server, model, [{"INPUTTensor": x} for x in together]
            )
        except InferenceError as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise NotYet(
                f"a request of {sum(ROWS)} rows, or {len(ROWS)} sent together, failed: {first}", rule="failed"
            ) from None
    _check_alone(alone, answers[0]["OUTPUTTensor"])
    for rows, x, out in zip(ROWS, together, answers[1:]):
        if not np.allclose(out["OUTPUTTensor"], peak_normalized(x), rtol=1e-4, atol=1e-6):
            raise NotYet(
                f"one request alone is right, but {len(ROWS)} requests of {', '.join(map(str, ROWS))} rows sent "
                f"together (one execute) got back vectors not divided by their own peaks (the request of "
                f"{rows} row(s) first).",
                "in a batch, a vector's neighbours may be another request's: compute "
                "each vector from its own 128 values.",
                rule="mixed",
            )


def _check_alone(alone: np.ndarray, got_alone: np.ndarray) -> None:
    """NotYet unless the answer to one request of sum(ROWS) rows has each vector divided by its own peak
    (the vector of zeros left as it is), saying what it looks like it did instead."""
    if got_alone.dtype != np.float32 or got_alone.shape != alone.shape:
        raise NotYet(
            f"OUTPUTTensor came back as {got_alone.dtype} {list(got_alone.shape)} for an input of {list(alone.shape)}.",
            "return the tensor batch.input() gave you, changed in place.",
            rule="shape",
        )
    zero = not np.isfinite(got_alone[2, 0]).all() or not np.allclose(got_alone[2, 0], 0)
    if np.allclose(got_alone, alone):
        raise NotYet(f"one request of {sum(ROWS)} rows came back unchanged.", rule="unchanged")
    if zero and np.allclose(
        np.delete(got_alone.reshape(-1, 128), 4, axis=0),
        np.delete(peak_normalized(alone).reshape(-1, 128), 4, axis=0),
        rtol=1e-4,
        atol=1e-6,
    ):
        raise NotYet(
            f"every vector is scaled by its own peak, except the vector of zeros, which became "
            f"{got_alone[2, 0][:4].tolist()}...",
            "a vector whose peak is 0 has nothing to scale.",
            rule="zeros",
        )
    if not np.allclose(got_alone, peak_normalized(alone), rtol=1e-4, atol=1e-6):
        vectors, got = alone.reshape(-1, 128), got_alone.reshape(-1, 128)
        kept = np.abs(vectors).max(axis=1) > 0  # the vector of zeros left out: every guess below divides it by 0
        with np.errstate(divide="ignore", invalid="ignore"):
            guesses = {
                "one peak for the whole request": vectors / np.abs(vectors).max(),
                "the largest value, not the largest magnitude": vectors / vectors.max(axis=1, keepdims=True),
            }
        guess = next(
            (
                f" (it divided by {what})"
                for what, y in guesses.items()
                if np.allclose(got[kept], y[kept], rtol=1e-4, atol=1e-6)
            ),
            "",
        )
        raise NotYet(
            f"one request of {sum(ROWS)} rows of [2, 128]: its vectors were not each divided by their own peak{guess}.",
            rule="values",
        )
