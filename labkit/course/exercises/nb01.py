"""Exercises of notebook 01 (a Python backend): a model.py written from nothing, and one bad request among
good ones. Both are judged by what the model answers to each request of a batch, not by how its text looks.

01-output2: ``compare`` answers, for each row of a request, DOT (FP32, the row's dot product) and ABOVE
(INT32, how many of INPUT0's values exceed INPUT1's). 01-bad-request: ``divide`` fails a request whose INPUT1
holds a 0 alone, with the code INVALID_ARG and a message that names INPUT1.

Each check serves the person's model.py in a model of its own whose batch runs when it holds exactly the rows
of a round (labkit.course.exercises.together), sends the round's requests together over gRPC, so that they
share one execute(), and compares each answer with its own.
"""

from __future__ import annotations

import numpy as np

from ...errors import ModelLoadError
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs
from .scratch import scratch_model
from .together import REQUEST_TIMEOUT_S, batched_copy, first_line, send_together

COMPARE = "compare"
DIVIDE = "divide"
#: Rows of each round's four requests together: the check's model runs a batch when it holds this many.
BATCH_ROWS = 5
PYTHON_README = "https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md"
ERROR_HANDLING = f"{PYTHON_README}#error-handling"
DEFAULT_MODE = f"{PYTHON_README}#default-mode"
#: gRPC's status names for Triton's error codes (TRITONSERVER_Error_Code / pb_utils.TritonError's constants).
_TRITON_NAMES = {
    "UNKNOWN": "UNKNOWN",
    "INTERNAL": "INTERNAL",
    "NOT_FOUND": "NOT_FOUND",
    "INVALID_ARGUMENT": "INVALID_ARG",
    "UNAVAILABLE": "UNAVAILABLE",
    "UNIMPLEMENTED": "UNSUPPORTED",
    "ALREADY_EXISTS": "ALREADY_EXISTS",
    "CANCELLED": "CANCELLED",
}


def _pairs(rounds: list[list[tuple[list, list]]]) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    return [[(_f32(a), _f32(b)) for a, b in sent] for sent in rounds]


def _judge_compare(server: TritonServer, model: str, sent: list[tuple[np.ndarray, np.ndarray]]) -> None:
    outcomes = send_together(server, model, [{"INPUT0": a, "INPUT1": b} for a, b in sent])
    where = [f" (request {i + 1} of {len(sent)}: {_shown(a, b)})" for i, (a, b) in enumerate(sent)]
    for i, outcome in enumerate(outcomes):
        if outcome[0] == "error" and outcome[1] == "DEADLINE_EXCEEDED":
            raise NotYet(
                f"{len(sent)} requests sent together (one execute): request {i + 1} ({_shown(*sent[i])}) got no "
                f"answer within {REQUEST_TIMEOUT_S} s.",
                "execute() must return its responses: a loop that never ends, or a wait, keeps every request of "
                "that execute waiting (lesson 19 shows where a stuck model is, and lab.unstick).",
                rule="timeout",
            )
        if outcome[0] == "error":
            raise NotYet(
                f"{len(sent)} requests sent together (one execute): request {i + 1} ({_shown(*sent[i])}) got an "
                f"error instead of an answer ({outcome[1]}: {first_line(outcome[2])}).",
                "execute() returns a list of pb_utils.InferenceResponse, one per request and in the order of "
                "requests; when it raises, or returns anything else, Triton fails every request of that execute "
                f"(python_backend README, r23.12, Default Mode: {DEFAULT_MODE}).",
                rule="error",
            )
    for i, (a, _) in enumerate(sent):
        require_configured_outputs(server, model, outcomes[i][1], rows=a.shape[0], shown=where[i], named=COMPARE)
    for i, (a, b) in enumerate(sent):
        got, dot = outcomes[i][1], np.sum(a * b, axis=1, keepdims=True)
        if not np.allclose(got["DOT"], dot):
            raise NotYet(
                f"DOT was {got['DOT'].tolist()}{where[i]}; expected {dot.tolist()}, each row's dot product.",
                "DOT belongs to one row: the products of that row's four pairs of values, added up; a request of "
                "two rows has two.",
                rule="dot",
            )
        above, ties = np.sum(a > b, axis=1, keepdims=True), np.sum(a >= b, axis=1, keepdims=True)
        if not np.array_equal(got["ABOVE"], above):
            said = ": that counts the ties (INPUT0 == INPUT1) too" if np.array_equal(got["ABOVE"], ties) else ""
            raise NotYet(
                f"ABOVE was {got['ABOVE'].tolist()}{where[i]}; expected {above.tolist()}{said}.",
                "ABOVE counts, row by row, the places where INPUT0's value is larger than INPUT1's.",
                rule="above",
            )


@exercise("01-output2", sources=(COMPARE,))
def compare(server: TritonServer) -> None:
    rounds = _pairs(
        [
            [
                ([[1, 2, 3, 4]], [[4, 3, 2, 1]]),
                ([[0.5, -1, 2, 2], [1, 1, 1, 1]], [[0.5, -2, 4, 1.5], [1, 1, 1, 1]]),  # ties, a row all ties
                ([[-1, -2, -3, -4]], [[2, 2, 2, 2]]),
                ([[3, 0, 0, 1]], [[-1, 0, 5, 0.25]]),
            ],
            [
                ([[2, 2, -2, 0.5], [-4, 8, 1, 0]], [[0.25, 2, -2, 4], [-3, 0.5, -1, 0]]),
                ([[6, 5, 4, 3]], [[1, 5, 9, -0.5]]),
                ([[0, 0, 0, 0]], [[0, 0, 0, 0]]),  # all ties: DOT 0, ABOVE 0
                ([[-1.5, 7, 2, 1]], [[-2, 7.5, 2, -1]]),
            ],
        ]
    )
    config, files = batched_copy(server, COMPARE, BATCH_ROWS)
    with scratch_model(server, COMPARE, config, files) as model:
        _load(server, model, COMPARE)
        for sent in rounds:
            _judge_compare(server, model, sent)


def _load(server: TritonServer, model: str, shown: str) -> None:
    try:
        server.load(model)
    except ModelLoadError as exc:
        raise NotYet(f"model.py of {shown} does not load: {exc.reason.strip().splitlines()[-1]}", rule="load") from None


def _shown(a: np.ndarray, b: np.ndarray) -> str:
    return f"INPUT0={a.tolist()}, INPUT1={b.tolist()}"


def _judge_round(server: TritonServer, model: str, sent: list[tuple[np.ndarray, np.ndarray]]) -> None:
    outcomes = send_together(server, model, [{"INPUT0": a, "INPUT1": b} for a, b in sent])
    bad = [bool((b == 0).any()) for _, b in sent]
    good_failed = [i for i, o in enumerate(outcomes) if not bad[i] and o[0] == "error"]
    if good_failed and len(good_failed) == bad.count(False):
        first = outcomes[good_failed[0]]
        raise NotYet(
            f"{len(sent)} requests sent together (one execute), {bad.count(True)} of them with a 0 in INPUT1: "
            f"the good ones failed too ({first[1]}: {first_line(first[2])}).",
            "an exception raised in execute() fails every request of that execute; an error can belong to one "
            f"response instead ({ERROR_HANDLING}).",
            rule="failed-all",
        )
    for i in good_failed:
        a, b = sent[i]
        raise NotYet(
            f"request {i + 1} of {len(sent)} ({_shown(a, b)}) has no 0 in INPUT1 but got an error "
            f"({outcomes[i][1]}: {first_line(outcomes[i][2])}).",
            "only a 0 in INPUT1 makes a request bad; every other request gets its quotient.",
            rule="refused-good",
        )
    for i, (a, b) in enumerate(sent):
        outcome = outcomes[i]
        if bad[i] and outcome[0] == "ok":
            raise NotYet(
                f"request {i + 1} of {len(sent)} ({_shown(a, b)}) got an answer, {_output0(outcome[1])}, "
                f"instead of an error.",
                rule="no-error",
            )
        if not bad[i]:
            shown = f" (request {i + 1}: {_shown(a, b)})"
            require_configured_outputs(server, model, outcome[1], rows=a.shape[0], shown=shown, named=DIVIDE)
            if not np.allclose(outcome[1]["OUTPUT0"], a / b):
                raise NotYet(
                    f"request {i + 1} of {len(sent)} ({_shown(a, b)}) got {_output0(outcome[1])}, not its "
                    f"quotient {(a / b).tolist()}.",
                    "each good request gets INPUT0 / INPUT1 of its own rows.",
                    rule="values",
                )
    for i, (a, b) in enumerate(sent):
        _, code, message = outcomes[i] if bad[i] else ("", "", "")
        if bad[i] and code != "INVALID_ARGUMENT":
            raise NotYet(
                f"request {i + 1} of {len(sent)} ({_shown(a, b)}) got an error, but with the code {code} "
                f"(Triton's {_TRITON_NAMES.get(code, code)}); a 0 the client sent is a bad argument.",
                f"pb_utils.TritonError takes a code after its message: which one says the request's input is "
                f"wrong? ({ERROR_HANDLING})",
                rule="code",
            )
        if bad[i] and "INPUT1" not in message:
            raise NotYet(
                f"request {i + 1} of {len(sent)} ({_shown(a, b)}) got an error with the message "
                f"{first_line(message)!r}, which does not name INPUT1.",
                "say what is wrong and where: the client sees only this message.",
                rule="message",
            )


def _output0(outputs: dict[str, np.ndarray]) -> object:
    return outputs["OUTPUT0"].tolist() if "OUTPUT0" in outputs else f"without OUTPUT0 ({', '.join(sorted(outputs))})"


def _f32(rows: list) -> np.ndarray:
    return np.array(rows, np.float32)


@exercise("01-bad-request", sources=(DIVIDE,))
def bad_request(server: TritonServer) -> None:
    rounds = [
        [
            (_f32([[3, -6, 1.5, 8]]), _f32([[1.5, 2, -0.5, 4]])),
            (_f32([[1, 2, 3, 4], [5, 6, 7, 8]]), _f32([[1, 1, 1, 1], [2, 0, 2, 2]])),  # a 0 in its second row
            (_f32([[0, 0, 5, 0]]), _f32([[7, -7, 2, 0.25]])),  # zeros in INPUT0 only: fine
            (_f32([[-9, 4, 2, 1]]), _f32([[3, 8, -4, 0.5]])),
        ],
        [
            (_f32([[2, 2, 2, 2], [9, 9, 9, 9]]), _f32([[4, 4, -8, 1], [3, -3, 9, 0.5]])),
            (_f32([[1, 1, 1, 1]]), _f32([[0, 0, 0, 0]])),  # all zeros
            (_f32([[6, 5, 4, 3]]), _f32([[2, 5, -0.0, 3]])),  # -0.0 is a zero too
            (_f32([[1, -1, 1, -1]]), _f32([[10, 10, 10, 10]])),
        ],
    ]
    config, files = batched_copy(server, DIVIDE, BATCH_ROWS)
    with scratch_model(server, DIVIDE, config, files) as model:
        _load(server, model, DIVIDE)
        for sent in rounds:
            _judge_round(server, model, sent)
