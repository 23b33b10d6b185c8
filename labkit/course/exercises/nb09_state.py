"""Exercises of notebook 09's stateful section: a Python model that keeps the running maximum of each
sequence, where the lesson's model keeps a running sum (the same controls, another rule).

The check serves the person's latest model.py in a model of its own (labkit.course.exercises.scratch), with the
config of the reference model sequence_accumulate (START / END / READY / CORRID controls, four batch
slots), and judges what it answers:
interleaved sequences over HTTP, a reused sequence id over gRPC, then sequences sent at the same
time, so that several share an execution.
"""

from __future__ import annotations

import threading

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError, ModelLoadError
from ...plumbing.transport import closing_http
from ...repository import ModelRepository
from ...server.base import TritonServer
from .. import reference
from .core import NotYet, exercise, require_configured_outputs
from .scratch import scratch_model

MODEL = "running_max"
#: Sequence id -> the values its requests carry; sent round-robin, one request of each in turn. Sequence 3
#: starts below 0, so a maximum that starts from 0 shows.
INTERLEAVED = {17: [5, 1, 9], 4242: [100, -30, 2, 108], 3: [-7, -9, 7]}


def _send(server: TritonServer, model: str, sequence: int, value: int, start: bool, end: bool, protocol: str) -> int:
    shown = f" (sequence {sequence}, INPUT={value})"
    try:
        out = infer(
            server,
            model,
            {"INPUT": np.array([[value]], np.int32)},
            protocol=protocol,
            sequence_id=sequence,
            sequence_start=start,
            sequence_end=end,
            timeout_s=10,
        )
    except InferenceError as exc:
        raise NotYet(
            f"a request{shown} failed: {(str(exc).strip().splitlines() or [''])[0]}",
            "every request of the list gets a response of its own, null requests (READY 0) too.",
            rule="failed",
        ) from None
    require_configured_outputs(server, model, out, rows=1, shown=shown)
    return int(out["OUTPUT"][0, 0])


def _sums(server: TritonServer, model: str, sequences: dict[int, list[int]], protocol: str) -> dict[int, list[int]]:
    got: dict[int, list[int]] = {s: [] for s in sequences}
    longest = max(map(len, sequences.values()))
    for step in range(longest):
        for sid, values in sequences.items():
            if step < len(values):
                got[sid].append(_send(server, model, sid, values[step], step == 0, step == len(values) - 1, protocol))
    return got


def _at_once(server: TritonServer, model: str) -> dict[int, list[int]]:
    """Four sequences of four requests, each from its own thread (two over HTTP, two over gRPC)."""
    sequences = {60 + k: [k + 1, 10, -(k + 1), 3] for k in range(4)}
    got: dict[int, list[int]] = {}
    failed: list[BaseException] = []

    def one(sid: int, protocol: str) -> None:
        try:
            got[sid] = [_send(server, model, sid, v, k == 0, k == 3, protocol) for k, v in enumerate(sequences[sid])]
        except BaseException as exc:  # noqa: BLE001 - raised in the check's thread below
            failed.append(exc)

    threads = [
        threading.Thread(target=closing_http(one), args=(sid, "http" if sid % 2 else "grpc")) for sid in sequences
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]
    return {sid: got[sid] for sid in sequences}


def _judge(server: TritonServer, model: str, hint: str) -> None:
    """NotYet unless ``model`` (loaded) keeps one running maximum per sequence, restarted at START; ``hint``
    goes with wrong sums."""
    got, wanted = _sums(server, model, INTERLEAVED, "http"), _wanted(INTERLEAVED)
    if got != wanted:
        # Named by where it first went wrong, not by the values: a null request's INPUT is whatever
        # memory held, so a model that adds it answers differently from run to run.
        sid, step = min(
            ((s, k) for s in got for k in range(len(got[s])) if got[s][k] != wanted[s][k]),
            key=lambda sk: (sk[1], list(INTERLEAVED).index(sk[0])),
        )
        raise NotYet(
            f"sequences {', '.join(map(str, INTERLEAVED))} sent in turn (one request of each) with INPUT "
            f"{list(INTERLEAVED.values())}: sequence {sid} went wrong at its request {step + 1}, whose "
            f"running maximum is {wanted[sid][step]} (all of them: {wanted[sid]}).",
            hint,
            rule="values",
        )
    again = _sums(server, model, {17: [2, 1]}, "grpc")
    if again[17] != [2, 2]:
        raise NotYet(
            f"sequence 17 ended, then began again (sequence_start) with INPUT [2, 1], over gRPC: it got "
            f"{again[17]}, not [2, 2].",
            "START means a new sequence: nothing of the old one counts.",
            rule="start",
        )
    together = _at_once(server, model)
    if together != _wanted({60 + k: [k + 1, 10, -(k + 1), 3] for k in range(4)}):
        raise NotYet(
            f"four sequences sent at the same time (several in one execute) got {list(together.values())}.",
            "answer every request of the list, each with its own sequence's sum.",
            rule="batched",
        )


def _wanted(sequences: dict[int, list[int]]) -> dict[int, list[int]]:
    return {sid: np.maximum.accumulate(values).tolist() for sid, values in sequences.items()}


@exercise("09-running-max", sources=(MODEL,))
def running_max(server: TritonServer) -> None:
    source = server.repository.model_dir(MODEL) / "1" / "model.py"
    if not source.exists():
        raise NotYet(
            f"model {MODEL!r} has no model.py yet.", f"run the `%%triton_python {MODEL}` cell first.", rule="setup"
        )
    config = ModelRepository(reference.repository()).read_config("sequence_accumulate")
    with scratch_model(server, "running_max", config, {"1/model.py": source.read_text()}) as model:
        try:
            server.load(model)
        except ModelLoadError as exc:
            raise NotYet(
                f"model.py of {MODEL} does not load: {exc.reason.strip().splitlines()[-1]}", rule="load"
            ) from None
        _judge(
            server,
            model,
            "each sequence has a maximum of its own, kept by its CORRID, and its first value is its first maximum.",
        )
