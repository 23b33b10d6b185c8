"""The checks of notebook 15 (a decoupled C++ countdown, a Python stream its client cancels) judge behaviour: right answers written differently
pass, plausible wrong ones fail with the rule that shows what is wrong, each built and served by a real
Triton the way the notebook's `%%triton_cpp` cell does, and the check leaves nothing behind."""

from __future__ import annotations

import pytest
from answers import body, edit, judge

import labkit
import labkit.server

pytestmark = pytest.mark.slow

LOOP = "    for (int32_t value = n; err == nullptr && value >= 1; --value) err = send_value(factory.get(), value);\n"
FINAL = """      log_if_error("ResponseFactorySendFlags",
                   TRITONBACKEND_ResponseFactorySendFlags(factory.get(), TRITONSERVER_RESPONSE_COMPLETE_FINAL));
"""
ANSWERS = {
    "solution": (body("15-countdown-cpp"), None),
    "a while loop": (
        edit(
            "15-countdown-cpp",
            (
                LOOP,
                "    int32_t left = n;\n    while (err == nullptr && left > 0) err = send_value(factory.get(), left--);\n",
            ),
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
                "    if (err == nullptr) {  // the end of the request: a flag, no response\n",
                "    if (err == nullptr && n == 0) {  // only N = 0 still needs the flag\n",
            ),
            (
                "    } else {  // or a last response carrying the error, final\n",
                "    } else if (err != nullptr) {  // or a last response carrying the error, final\n",
            ),
        ),
        None,
    ),
    "the starter: one response from the request": (body("15-countdown-cpp", "starter"), "values"),
    "N-1 down to 0": (
        edit("15-countdown-cpp", ("int32_t value = n;", "int32_t value = n - 1;"), ("value >= 1;", "value >= 0;")),
        "values",
    ),
    "counting up": (
        edit(
            "15-countdown-cpp",
            (
                LOOP,
                "    for (int32_t value = 1; err == nullptr && value <= n; ++value) err = send_value(factory.get(), value);\n",
            ),
        ),
        "values",
    ),
    "no final flag: the stream never ends": (edit("15-countdown-cpp", (FINAL, "")), "failed"),
    "does not compile": (edit("15-countdown-cpp", (LOOP, LOOP.replace("send_value(", "send_valu("))), "build"),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One server as notebook 15 is before the exercise: the model's decoupled config written."""
    with labkit.server.EmbeddedServer(workdir=tmp_path_factory.mktemp("lab")) as server:
        server.start()
        cfg = labkit.model_config("countdown_cpp", "countdowncpp", [("N", "INT32", [1])], [("OUT", "INT32", [1])])
        cfg.model_transaction_policy.decoupled = True
        server.repository.write_config(cfg)
        ticker = labkit.model_config("ticker", "python", [("N", "INT32", [1])], [("OUT", "INT32", [1])])
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
ASK = "                if request.is_cancelled():  # the client gave up: nobody reads the rest\n                    break\n"
TICKER = {
    "solution": (body("15-cancel-stream"), None),
    "asked after each response": (
        edit(
            "15-cancel-stream",
            (ASK, ""),
            (
                "                time.sleep(0.02)  # 20 ms of work before the next response\n",
                "                time.sleep(0.02)  # 20 ms of work before the next response\n"
                "                if request.is_cancelled():\n                    break\n",
            ),
        ),
        None,
    ),
    "a while loop": (
        edit(
            "15-cancel-stream",
            (
                "            for k in range(1, n + 1):\n" + ASK,
                "            k = 1\n            while k <= n and not request.is_cancelled():\n",
            ),
            (
                "                time.sleep(0.02)  # 20 ms of work before the next response\n",
                "                time.sleep(0.02)\n                k += 1\n",
            ),
        ),
        None,
    ),
    "the starter: never asks": (body("15-cancel-stream", "starter"), "kept-going"),
    "asks once, before the loop": (
        edit(
            "15-cancel-stream",
            (ASK, ""),
            (
                "            for k in range(1, n + 1):\n",
                "            if request.is_cancelled():\n                n = 0\n            for k in range(1, n + 1):\n",
            ),
        ),
        "kept-going",
    ),
    "stops sending but goes on working": (
        edit(
            "15-cancel-stream",
            (ASK, ""),
            (
                "                sender.send(pb_utils.InferenceResponse(",
                "                if not request.is_cancelled():\n                    sender.send(pb_utils.InferenceResponse(",
            ),
        ),
        "kept-going",
    ),
    "counts from 0": (edit("15-cancel-stream", ("range(1, n + 1)", "range(n)")), "values"),
}


@pytest.mark.parametrize("answer", list(TICKER))
def test_15_cancel_stream(lab, answer):
    source, rule = TICKER[answer]
    judge(lab, "15-cancel-stream", lambda: lab.python_model("ticker", source), rule)
