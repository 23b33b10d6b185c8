"""The checks of notebooks 17 and 18 against a corpus of answers: right ones written differently pass, plausible wrong
ones fail with the rule that shows what is wrong, and the check leaves nothing behind.

Each answer is the reference solution (or starter) with one change, served by a real Triton the way the
notebook's cell serves it (``python_model``, as ``%%triton_python`` does), beside the real vad it asks."""

from __future__ import annotations

import pytest
from answers import body, edit, judge

import labkit
from labkit.course.exercises import nb17, nb18
from labkit.lessons import real_models

READ = 'threshold = float(json.loads(request.parameters()).get("threshold", self.threshold))'

ANSWERS = {
    "solution": (body("18-threshold"), None),
    "the parameters read into a dict first": (
        edit(
            "18-threshold",
            (
                READ,
                'asked = json.loads(request.parameters())\n        threshold = float(asked["threshold"]) '
                'if "threshold" in asked else self.threshold',
            ),
        ),
        None,
    ),
    "the starter (the config's threshold for every request)": (body("18-threshold", "starter"), "threshold"),
    "the request's threshold for starts, the config's for ends": (
        edit("18-threshold", ("probability < threshold - 0.15", "probability < self.threshold - 0.15")),
        "threshold",
    ),
    "no default when a request has none": (
        edit("18-threshold", (READ, 'threshold = float(json.loads(request.parameters())["threshold"])')),
        "",  # the model's KeyError comes back as the stream's error
    ),
    "a default of its own, not the config's": (
        edit("18-threshold", (READ, 'threshold = float(json.loads(request.parameters()).get("threshold", 0.9))')),
        "default",
    ),
}


@pytest.fixture(scope="module")
def lab():
    with labkit.start() as server:
        real_models.serve(server, progress=None)
        yield server


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_18_threshold(lab, answer):
    source, rule = ANSWERS[answer]
    judge(lab, "18-threshold", lambda: lab.python_model(nb18.MODEL, source), rule)


SEND = """        batches = [np.stack(crops[i : i + BATCH]) for i in range(0, len(crops), BATCH)]  # [n, 3, 48, 320] each"""
ROWS = """            words += [row[0].decode() for row in pb_utils.get_output_tensor_by_name(answer, "TEXT").as_numpy()]"""

BATCHES = {
    "solution": (body("17-one-request"), None),
    "the batches cut with numpy": (
        edit(
            "17-one-request",
            (SEND, "        batches = np.array_split(np.stack(crops), -(-len(crops) // BATCH))"),
        ),
        None,
    ),
    "the starter (a request per crop)": (body("17-one-request", "starter"), "requests"),
    "batches of four": (edit("17-one-request", ("BATCH = 8  #", "BATCH = 4  #")), "requests"),
    "every crop in one request, past the batch ocr_rec takes": (
        edit("17-one-request", (SEND, "        batches = [np.stack(crops)]")),
        "",  # ocr_rec refuses a batch of more than 8: the request fails, and the check says so
    ),
    "each batch's rows read backwards": (
        edit("17-one-request", (ROWS, ROWS.replace(".as_numpy()]", ".as_numpy()[::-1]]"))),
        "text",
    ),
}


@pytest.mark.parametrize("answer", list(BATCHES))
def test_17_one_request(lab, answer):
    source, rule = BATCHES[answer]
    judge(lab, "17-one-request", lambda: lab.python_model(nb17.READER, source), rule)
