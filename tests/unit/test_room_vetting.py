"""The grader runs no participant Python beyond what a starter does: every shipped starter and reference
solution, and right answers written otherwise, pass; code that could patch a check is refused (read with
``ast``, nothing runs)."""

from __future__ import annotations

import pytest

from labkit.course.exercises import REGISTRY
from labkit.room.grader.vetting import refusal


@pytest.mark.parametrize("exercise", sorted(REGISTRY))
def test_every_starter_and_solution_runs_in_the_grader(exercise):
    assert refusal(exercise, REGISTRY[exercise].starter()) == ""
    assert refusal(exercise, REGISTRY[exercise].solution()) == ""


@pytest.mark.parametrize(
    "exercise, source",
    [
        ("03-delay", "delay_us = 2 * 1000"),
        ("03-delay", "delay_us = np.int64(2000)"),
        ("03-delay", "delay_us = 3000.0  # whole"),
        ("03-delay", "delay_us = (2000)"),
        ("03-delay", "base = np.int64(1000)\ndelay_us = 2 * base"),
        ("03-preferred", "%%triton_config batched_add_sub\nmax_batch_size: 8\n# anything: Triton reads it, not Python"),
        ("03-delay", "step = 500\ndelay_us = step"),
        (
            "09-fourth-power",
            'name = "fourth_power"\na = labkit.Step("preprocess", inputs={"RAW": "RAW"}, outputs={"SCALED": "unit"})\n'
            'b = labkit.Step(model="square", inputs={"IN0": "unit"}, outputs={"OUT0": "pow2"})\n'
            'c = labkit.Step("square", inputs={"IN0": "pow2"}, outputs={"OUT0": "RESULT"})\n'
            'cfg = labkit.ensemble_config(name, [("RAW", "INT32", [4])], [("RESULT", "FP32", [4])], [c, b, a])\n'
            "lab.repository.write_config(cfg)\nlab.load(name)",
        ),
        ("01-output2", REGISTRY["01-output2"].starter().splitlines()[0] + "\nimport os\nanything = 'model code'\n"),
    ],
)
def test_right_answers_written_otherwise_run(exercise, source):
    assert refusal(exercise, source) == ""


@pytest.mark.parametrize(
    "exercise, source",
    [
        ("01-output2", "import labkit.course.exercises as e\ne.check = lambda *a, **k: None"),  # the magic line removed
        ("01-output2", "%%triton_python another_model\nclass TritonPythonModel: pass"),
        ("01-output2", "%%bash\necho passed"),
        ("03-delay", "delay_us = 2000\nimport labkit"),
        ("03-delay", "delay_us = __import__('os').system('true')"),
        ("03-delay", "delay_us = 2000; labkit.exercises.check = print"),
        ("03-delay", "!echo passed\ndelay_us = 2000"),
        ("03-delay", "%time delay_us = 2000"),
        ("03-delay", "delay_us = 2000\nprint('passed: 03-delay')"),
        ("03-delay", "delay_us = 2 ** 10"),
        ("03-delay", "delay_us = [x for x in (1, 2)]"),
        ("03-preferred", "preferred = [open('/etc/passwd')]"),
        ("03-preferred", "%%triton_config another_model\nmax_batch_size: 8"),
        ("03-preferred", "%%triton_python batched_add_sub\nclass TritonPythonModel: pass"),
        ("09-fourth-power", "cfg = labkit.ensemble_config(**{'name': 'fourth_power'})"),
        ("09-fourth-power", 'lab.load("fourth_power")\nlab.stop()'),
        ("09-fourth-power", "cfg = labkit.ensemble_config(lab.stop())"),
        ("09-fourth-power", "def f(): pass"),
        ("09-fourth-power", 'step = labkit.Step("square", inputs=__import__("os").environ)'),
    ],
)
def test_code_that_could_patch_a_check_is_refused(exercise, source):
    assert refusal(exercise, source) != ""
