"""The checks of notebook 15 (a C++ countdown on a thread per request, a batch of Python streams one of which
its client cancels) judge behaviour: right answers written differently pass, plausible wrong ones fail with the
rule that shows what is wrong, each built and served by a real Triton the way the notebook's cells do, and
the check leaves nothing behind."""

from __future__ import annotations

import pytest
from answers import body, edit, judge

import labkit
import labkit.server

pytestmark = pytest.mark.slow

DETACH = "    }).detach();\n"
FINAL = """    log_if_error("ResponseFactorySendFlags",
                 TRITONBACKEND_ResponseFactorySendFlags(factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL));
"""
LOOP = "  for (int32_t value = n; err == nullptr && value >= 1; --value) {\n"
ANSWERS = {
    "solution": (body("15-countdown-cpp"), None),
    "a while loop": (
        edit(
            "15-countdown-cpp",
            (LOOP, "  int32_t value = n;\n  while (err == nullptr && value >= 1) {\n"),
            ("    err = send_value(factory, value);\n", "    err = send_value(factory, value--);\n"),
        ),
        None,
    ),
    "the final flag on the last response": (
        edit(
            "15-countdown-cpp",
            (
                "  return TRITONBACKEND_ResponseSend(response, 0, nullptr);",
                "  return TRITONBACKEND_ResponseSend(response, value == 1 ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0, nullptr);",
            ),
            (
                '  if (err == nullptr) {\n    log_if_error("ResponseFactorySendFlags"',
                '  if (err == nullptr && n == 0) {\n    log_if_error("ResponseFactorySendFlags"',
            ),
            ("  finish(factory, err);\n", "  if (n == 0 || err != nullptr) finish(factory, err);\n"),
            (
                "static void finish(TRITONBACKEND_ResponseFactory* factory, TRITONSERVER_Error* err) {\n",
                "static void finish(TRITONBACKEND_ResponseFactory* factory, TRITONSERVER_Error* err, int32_t n = 0) {\n",
            ),
            (
                "  if (n == 0 || err != nullptr) finish(factory, err);\n",
                "  if (n == 0 || err != nullptr) finish(factory, err, n);\n",
            ),
        ),
        None,
    ),
    "the starter: every stream inside execute": (body("15-countdown-cpp", "starter"), "one-at-a-time"),
    "a thread, joined at once": (edit("15-countdown-cpp", (DETACH, "    }).join();\n")), "one-at-a-time"),
    "counting up": (
        edit("15-countdown-cpp", (LOOP, "  for (int32_t value = 1; err == nullptr && value <= n; ++value) {\n")),
        "values",
    ),
    "no final flag: the streams never end": (edit("15-countdown-cpp", (FINAL, "")), "failed"),
    "does not compile": (edit("15-countdown-cpp", (DETACH, "    }).detatch();\n")), "build"),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One server as notebook 15 is before the exercises: the models' decoupled configs written."""
    with labkit.server.EmbeddedServer(workdir=tmp_path_factory.mktemp("lab")) as server:
        server.start()
        cfg = labkit.model_config("countdown_cpp", "countdowncpp", [("N", "INT32", [1])], [("OUT", "INT32", [1])])
        cfg.model_transaction_policy.decoupled = True
        server.repository.write_config(cfg)
        ticker = labkit.model_config(
            "ticker",
            "python",
            [("N", "INT32", [1])],
            [("OUT", "INT32", [1])],
            max_batch_size=4,
            dynamic_batching={"max_queue_delay_microseconds": 100_000},
        )
        ticker.model_transaction_policy.decoupled = True
        server.repository.write_config(ticker)
        yield server


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_15_countdown_cpp(lab, answer):
    source, rule = ANSWERS[answer]
    if rule == "build":  # the magic's way: the failed build is recorded, the check says the latest cell did not build
        with pytest.raises(labkit.BuildError):
            lab.cpp_backend("countdowncpp", source, first_line=2, progress=False)
        verdict = labkit.exercises.check("15-countdown-cpp", lab)
        assert (verdict.passed, verdict.rule) == (False, "build"), repr(verdict)
        return
    judge(lab, "15-countdown-cpp", lambda: lab.cpp_backend("countdowncpp", source, first_line=2, progress=False), rule)


# -- 15-cancel-stream ---------------------------------------------------------------------------------------
ASK = """                if request.is_cancelled():  # its client gave up: close its stream, keep the others going
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    continue
"""
EACH = "            for request, sender, n in live:\n"
TICKER = {
    "solution": (body("15-cancel-stream"), None),
    "the cancelled ones filtered out before each tick": (
        edit(
            "15-cancel-stream",
            (ASK, ""),
            (
                EACH,
                "            for request, sender, n in [s for s in live if s[0].is_cancelled()]:\n"
                "                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n"
                "            live = [s for s in live if not s[0].is_cancelled()]\n" + EACH,
            ),
        ),
        None,
    ),
    "one request at a time, asked before each tick": (
        """import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().item())
            sender = request.get_response_sender()
            for tick in range(1, n + 1):
                if request.is_cancelled():
                    break
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([[tick]], dtype=np.int32))]))
                time.sleep(0.02)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
""",
        None,
    ),
    "the starter: never asks": (body("15-cancel-stream", "starter"), "kept-going"),
    "asks only the first request of the batch": (
        edit(
            "15-cancel-stream",
            (ASK, ""),
            (
                EACH,
                "            if requests[0].is_cancelled():\n"
                "                live = [s for s in live if s[0] is not requests[0]]\n" + EACH,
            ),
        ),
        "kept-going",
    ),
    "one cancelled request stops the whole batch": (
        edit(
            "15-cancel-stream",
            (ASK, ""),
            ("        while live:\n", "        while live and not any(r.is_cancelled() for r in requests):\n"),
        ),
        "others-stopped",
    ),
    "returns from execute on a cancellation": (
        edit(
            "15-cancel-stream",
            (
                ASK,
                "                if request.is_cancelled():\n"
                "                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n"
                "                    return None\n",
            ),
        ),
        "others-stopped",
    ),
    "counts from 0": (
        edit(
            "15-cancel-stream", ("if tick <= n:", "if tick <= n + 1:"), ("np.array([[tick]]", "np.array([[tick - 1]]")
        ),
        "values",
    ),
}


@pytest.mark.parametrize("answer", list(TICKER))
def test_15_cancel_stream(lab, answer):
    source, rule = TICKER[answer]
    judge(lab, "15-cancel-stream", lambda: lab.python_model("ticker", source), rule)
