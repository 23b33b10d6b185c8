"""The check of notebook 09's ensemble exercise against a corpus of answers, each the plain cell a participant
runs (a config written with labkit.ensemble_config and loaded): right ones written differently pass, plausible
wrong ones fail with the rule that shows what is wrong, and the check leaves nothing behind."""

from __future__ import annotations

import numpy as np
import pytest
from answers import judge

import labkit
import labkit.server
from labkit.course.exercises import REGISTRY
from labkit.course.lessons import ensemble
from labkit.errors import LabkitError

pytestmark = pytest.mark.slow

SOLUTION = REGISTRY["09-fourth-power"].solution()
STARTER = REGISTRY["09-fourth-power"].starter()


def edit(*changes: tuple[str, str]) -> str:
    text = SOLUTION
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


SECOND_READS = ('inputs={"IN0": "squared"}', 'inputs={"IN0": "scaled"}')
NESTED = """inner = labkit.Step("pipeline", inputs={"RAW": "RAW"}, outputs={"RESULT": "squared"})
outer = labkit.Step("square", inputs={"IN0": "squared"}, outputs={"OUT0": "RESULT"})
cfg = labkit.ensemble_config("fourth_power", [("RAW", "INT32", [4])], [("RESULT", "FP32", [4])], [inner, outer])
lab.repository.write_config(cfg)
lab.load("fourth_power")
"""
ANSWERS = {
    # label: (cells run in order, the rule it fails by or None)
    "solution": ([SOLUTION], None),
    "steps listed last to first": ([edit(("[pre, first, second]", "[second, first, pre]"))], None),
    "other names inside, keyword arguments": (
        [
            edit(
                ('"scaled"', '"unit"'),
                ('"squared"', '"unit_squared"'),
                ('labkit.Step("square", inputs', 'labkit.Step(model="square", inputs'),
            )
        ],
        None,
    ),
    "the lesson's pipeline as a step": ([NESTED], None),
    "the starter: squared once": ([STARTER], "values"),
    "three squares": (
        [
            edit(
                (
                    'outputs={"OUT0": "RESULT"})',
                    'outputs={"OUT0": "fourth"})\n'
                    'third = labkit.Step("square", inputs={"IN0": "fourth"}, outputs={"OUT0": "RESULT"})',
                ),
                ("[pre, first, second]", "[pre, first, second, third]"),
            )
        ],
        "values",
    ),
    "the second square reads scaled (refused: squared unused)": ([STARTER, edit(SECOND_READS)], "stale"),
    "both squares write RESULT (refused)": (
        [STARTER, edit(('outputs={"OUT0": "squared"}', 'outputs={"OUT0": "RESULT"}'))],
        "stale",
    ),
    "a map the wrong way round (refused)": (
        [STARTER, edit(('inputs={"IN0": "squared"}', 'inputs={"squared": "IN0"}'))],
        "stale",
    ),
    "written, not loaded": ([STARTER, edit(('lab.load("fourth_power")\n', ""))], "stale"),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A server as notebook 09 is at its ensemble exercise: preprocess, square and the pipeline serving."""
    with labkit.server.EmbeddedServer(workdir=tmp_path_factory.mktemp("lab")) as server:
        server.start()
        ensemble.setup(server)
        yield server


def run(server: labkit.server.TritonServer, cells: list[str]) -> None:
    for cell in cells:
        try:
            exec(cell, {"lab": server, "labkit": labkit, "np": np})
        except LabkitError:
            pass  # the participant sees Triton's refusal under the cell


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_09_fourth_power(lab, answer):
    cells, rule = ANSWERS[answer]
    judge(lab, "09-fourth-power", lambda: run(lab, cells), rule)


def test_09_fourth_power_without_the_ensemble(tmp_path):
    with labkit.server.EmbeddedServer(workdir=tmp_path) as server:
        server.start()
        verdict = labkit.exercises.check("09-fourth-power", server)
    assert (verdict.passed, verdict.rule) == (False, "setup"), repr(verdict)


def test_the_corpus_has_three_right_and_three_wrong_answers():
    rules = [rule for _, rule in ANSWERS.values()]
    assert rules.count(None) >= 3 and len(rules) - rules.count(None) >= 3
