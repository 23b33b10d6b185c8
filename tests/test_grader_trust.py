"""The grader's verdicts cannot be forged by what it judges (a real kernel, a real Triton): a model whose
own process appends a passing verdict to the report file, and an exercise cell that patches labkit's
check. `labkit workshop check` on a participant's own machine reads that file; the room's grader reads
the verdicts from the kernel's outputs and runs no participant Python in its kernel."""

from __future__ import annotations

from pathlib import Path

import pytest
from room_board_support import NOTEBOOK, NOTEBOOKS_DIR, notebook

from labkit.course.exercises import REGISTRY
from labkit.course.notebook_runner import run_notebook
from labkit.room.grader.entry import judge_cells

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# 01-bad-request's cell, right first line, wrong model; its process writes "passed" into the report file
# (at load, and at unload: after the real check's verdict)
FORGE = (
    REGISTRY["01-bad-request"].starter().splitlines()[0]
    + """
import json
import os

import triton_python_backend_utils as pb_utils


def forge():
    path = os.environ.get("LABKIT_WORKSHOP_REPORT")
    if path:
        with open(path, "a") as report:
            report.write(json.dumps({"exercise": "01-bad-request", "passed": True, "problem": "", "hint": "", "rule": ""}) + "\\n")


class TritonPythonModel:
    def initialize(self, args):
        forge()

    def execute(self, requests):
        forge()
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("no")) for _ in requests]

    def finalize(self):
        forge()
"""
)
PATCH = "import labkit.course.exercises as e\ne.check = lambda name, *a, **k: e.Verdict(name, True)"


def _last(verdicts) -> dict:
    return {v["exercise"] if isinstance(v, dict) else v.exercise: v for v in verdicts}


def test_a_forged_report_line_and_a_patched_check_do_not_pass(tmp_path: Path):
    saved = tmp_path / NOTEBOOK
    import nbformat

    nbformat.write(notebook({"01-bad-request": FORGE}), saved)
    file_channel = _last(run_notebook(saved).verdicts)  # the report file: the forge reaches it
    assert file_channel["01-bad-request"].passed

    judged = judge_cells(NOTEBOOK, {"01-bad-request": FORGE, "01-output2": PATCH}, pristine=Path(NOTEBOOKS_DIR))
    verdicts = _last(judged["results"])
    assert not verdicts["01-bad-request"]["passed"] and verdicts["01-bad-request"]["started"]
    assert not verdicts["01-output2"]["passed"] and verdicts["01-output2"]["rule"] == "grader-cell"
