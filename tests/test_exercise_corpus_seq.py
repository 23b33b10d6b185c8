"""The check of notebook 09's stateful exercise judges behaviour: right answers written differently pass,
plausible wrong ones fail with the rule that shows what is wrong, each served by a real Triton the way
the notebook serves it, and the check leaves nothing behind."""

from __future__ import annotations

import pytest
from answers import body, edit, judge

import labkit
import labkit.server

pytestmark = pytest.mark.slow

CORRID = 'scalar(request, "CORRID")'
STEP = "largest = self.largest[sequence] = max(self.largest.get(sequence, x), x)"
RESET = """                if scalar(request, "START"):
                    self.largest.pop(sequence, None)
"""
FORGET = """                if scalar(request, "END"):
                    del self.largest[sequence]
"""

ANSWERS = {
    "solution": (body("09-running-max"), None),
    "request.correlation_id() instead of CORRID": (edit("09-running-max", (CORRID, "request.correlation_id()")), None),
    "every value kept, max() of them": (
        edit(
            "09-running-max",
            (RESET, '                if scalar(request, "START"):\n                    self.largest[sequence] = []\n'),
            (
                STEP,
                "self.largest.setdefault(sequence, []).append(x)\n                largest = max(self.largest[sequence])",
            ),
        ),
        None,
    ),
    "numpy's maximum, a sentinel for a new sequence": (
        edit(
            "09-running-max",
            (STEP, "largest = self.largest[sequence] = int(np.maximum(self.largest.get(sequence, -(2**31)), x))"),
        ),
        None,
    ),
    "the starter: one maximum for everything": (body("09-running-max", "starter"), "values"),
    "START never read: a reused id keeps its old maximum": (edit("09-running-max", (RESET, ""), (FORGET, "")), "start"),
    "a maximum that starts from 0": (
        edit("09-running-max", (STEP, "largest = self.largest[sequence] = max(self.largest.get(sequence, 0), x)")),
        "values",
    ),
    "the running minimum": (edit("09-running-max", (STEP, STEP.replace("max(", "min("))), "values"),
    "does not load": (edit("09-running-max", ("def initialize(self, args):", "def initialize(self, args)")), "load"),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One server as notebook 09 is before its exercises: configs written with labkit's helper."""
    with labkit.server.EmbeddedServer(workdir=tmp_path_factory.mktemp("lab")) as server:
        server.start()
        server.repository.write_config(
            labkit.sequence_batching(
                labkit.model_config(
                    "running_max", "python", [("INPUT", "INT32", [1])], [("OUTPUT", "INT32", [1])], max_batch_size=4
                )
            )
        )
        yield server


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_09_running_max(lab, answer):
    source, rule = ANSWERS[answer]
    if rule == "load":  # the magic's way: the failed load is recorded, the check says the latest cell did not load
        with pytest.raises(labkit.ModelLoadError):
            lab.python_model("running_max", source)
        verdict = labkit.exercises.check("09-running-max", lab)
        assert (verdict.passed, verdict.rule) == (False, "load"), repr(verdict)
        return
    judge(lab, "09-running-max", lambda: lab.python_model("running_max", source), rule)


def test_09_without_a_model(tmp_path):
    with labkit.server.EmbeddedServer(workdir=tmp_path) as server:
        server.start()
        verdict = labkit.exercises.check("09-running-max", server)
    assert (verdict.passed, verdict.rule) == (False, "setup"), repr(verdict)
