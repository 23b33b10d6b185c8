"""Exercises of notebook 01 (a Python backend): a third output, and one bad request among good ones.

01-bad-request is judged by what the model answers, not by how its text looks: the check serves the
person's model.py in a model of its own whose batches hold exactly the rows it sends, sends four
requests together over gRPC (whose status codes carry Triton's error codes; HTTP answers 400 for every
error a model returns in 23.12), so that they share one execute(), one or two of them with a 0 in INPUT1,
and looks at each answer: the good ones get their quotients, a bad one an error with the code
INVALID_ARG and a message that names INPUT1.
"""

from __future__ import annotations

import threading

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from ...client.inference import infer
from ...errors import ModelLoadError
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs
from .scratch import config_of, scratch_model

OUTPUT2_MODEL = "add_sub3"
DIVIDE = "divide"
#: Rows of each round's four requests together: the check's model runs a batch when it holds this many.
BATCH_ROWS = 5
REQUEST_TIMEOUT_S = 30
ERROR_HANDLING = "https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#error-handling"
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


@exercise("01-output2", sources=(OUTPUT2_MODEL,))
def output2(server: TritonServer) -> None:
    rng = np.random.default_rng(2023)
    a = rng.integers(-9, 10, 4).astype(np.float32) / 2
    b = rng.integers(-9, 10, 4).astype(np.float32) / 4
    shown = f" (for INPUT0={a.tolist()}, INPUT1={b.tolist()})"
    out = infer(server, OUTPUT2_MODEL, {"INPUT0": a, "INPUT1": b})
    if "OUTPUT2" not in out:
        raise NotYet(f"the answer has no OUTPUT2{shown}; it has {', '.join(sorted(out))}.")
    require_configured_outputs(server, OUTPUT2_MODEL, out, shown=shown)
    got = out["OUTPUT2"]
    if np.allclose(got, a + b) and not np.allclose(a + b, a * b):
        raise NotYet(
            f"OUTPUT2 was {got.tolist()}{shown}: that is INPUT0 + INPUT1.",
            "OUTPUT2 is the element-wise product of the inputs, not their sum.",
        )
    if not np.allclose(got, a * b):
        raise NotYet(f"OUTPUT2 was {got.tolist()}{shown}; expected their product {(a * b).tolist()}.")
    if not (np.allclose(out["OUTPUT0"], a + b) and np.allclose(out["OUTPUT1"], a - b)):
        raise NotYet(
            "OUTPUT2 is right, but OUTPUT0/OUTPUT1 are no longer the sum and difference.",
            "keep the two outputs add_sub already had.",
        )


def _divide_model(server: TritonServer) -> tuple:
    """The config and model.py of the check's model: the notebook's divide, one instance, whose batch is
    full (and runs) exactly when the BATCH_ROWS rows of a round are there."""
    source = server.repository.model_dir(DIVIDE) / "1" / "model.py"
    if not source.exists():
        raise NotYet(
            f"model {DIVIDE!r} has no model.py yet.", f"run the `%%triton_python {DIVIDE}` cell first.", rule="setup"
        )
    config = config_of(server, DIVIDE, f"the cell that writes the config of {DIVIDE}")
    config.max_batch_size = BATCH_ROWS
    config.dynamic_batching.max_queue_delay_microseconds = 5_000_000  # time enough for all four to arrive
    del config.dynamic_batching.preferred_batch_size[:]
    del config.instance_group[1:]
    config.instance_group[0].count = 1
    return config, {"1/model.py": source.read_text()}


def _together(server: TritonServer, model: str, sent: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple]:
    """Send ``sent`` at the same moment over gRPC, one client and thread each; per request ("ok", OUTPUT0)
    or ("error", Triton's status code name, message)."""
    barrier = threading.Barrier(len(sent))
    outcomes: list[tuple] = [("error", "NOT_SENT", "the request was not sent")] * len(sent)

    def one(index: int) -> None:
        a, b = sent[index]
        client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
        try:
            tensors = [
                grpcclient.InferInput("INPUT0", list(a.shape), "FP32"),
                grpcclient.InferInput("INPUT1", list(b.shape), "FP32"),
            ]
            tensors[0].set_data_from_numpy(a)
            tensors[1].set_data_from_numpy(b)
            barrier.wait(timeout=30)
            result = client.infer(model, tensors, client_timeout=REQUEST_TIMEOUT_S)
            outcomes[index] = ("ok", result.as_numpy("OUTPUT0"))
        except InferenceServerException as exc:
            outcomes[index] = ("error", str(exc.status() or "").removeprefix("StatusCode."), exc.message() or str(exc))
        except threading.BrokenBarrierError:
            pass
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(i,), name=f"labkit-divide-{i}") for i in range(len(sent))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _shown(a: np.ndarray, b: np.ndarray) -> str:
    return f"INPUT0={a.tolist()}, INPUT1={b.tolist()}"


def _judge_round(server: TritonServer, model: str, sent: list[tuple[np.ndarray, np.ndarray]]) -> None:
    outcomes = _together(server, model, sent)
    bad = [bool((b == 0).any()) for _, b in sent]
    good_failed = [i for i, o in enumerate(outcomes) if not bad[i] and o[0] == "error"]
    if good_failed and len(good_failed) == bad.count(False):
        first = outcomes[good_failed[0]]
        raise NotYet(
            f"{len(sent)} requests sent together (one execute), {bad.count(True)} of them with a 0 in INPUT1: "
            f"the good ones failed too ({first[1]}: {_first_line(first[2])}).",
            "an exception raised in execute() fails every request of that execute; an error can belong to one "
            f"response instead ({ERROR_HANDLING}).",
            rule="failed-all",
        )
    for i in good_failed:
        a, b = sent[i]
        raise NotYet(
            f"request {i + 1} of {len(sent)} ({_shown(a, b)}) has no 0 in INPUT1 but got an error "
            f"({outcomes[i][1]}: {_first_line(outcomes[i][2])}).",
            "only a 0 in INPUT1 makes a request bad; every other request gets its quotient.",
            rule="refused-good",
        )
    for i, (a, b) in enumerate(sent):
        outcome = outcomes[i]
        if bad[i] and outcome[0] == "ok":
            raise NotYet(
                f"request {i + 1} of {len(sent)} ({_shown(a, b)}) got an answer, {outcome[1].tolist()}, "
                f"instead of an error.",
                rule="no-error",
            )
        if not bad[i]:
            out = {"OUTPUT0": outcome[1]}
            require_configured_outputs(server, model, out, rows=a.shape[0], shown=f" (request {i + 1}: {_shown(a, b)})")
            if not np.allclose(outcome[1], a / b):
                raise NotYet(
                    f"request {i + 1} of {len(sent)} ({_shown(a, b)}) got {outcome[1].tolist()}, not its "
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
                f"{_first_line(message)!r}, which does not name INPUT1.",
                "say what is wrong and where: the client sees only this message.",
                rule="message",
            )


def _f32(rows: list) -> np.ndarray:
    return np.array(rows, np.float32)


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


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
    config, files = _divide_model(server)
    with scratch_model(server, "divide", config, files) as model:
        try:
            server.load(model)
        except ModelLoadError as exc:
            raise NotYet(
                f"model.py of {DIVIDE} does not load: {exc.reason.strip().splitlines()[-1]}", rule="load"
            ) from None
        for sent in rounds:
            _judge_round(server, model, sent)
