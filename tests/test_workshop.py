"""Exercises and `labkit workshop`: checks against a real Triton, and the shipped notebooks run both ways."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import labkit
from labkit import exercises, workshop
from labkit.exercises import REGISTRY

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _body(cell: str) -> str:
    """A %%triton_python cell's model.py (the magic line dropped)."""
    return cell.split("\n", 1)[1]


def test_every_exercise_has_a_starter_a_solution_and_a_tagged_cell():
    tagged = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if workshop.exercise_of(cell):
                tagged[workshop.exercise_of(cell)] = (path.stem, cell.source)
    assert set(tagged) == set(REGISTRY)
    for exercise_id, item in REGISTRY.items():
        notebook, source = tagged[exercise_id]
        assert notebook == item.notebook
        assert source.strip() == item.starter().strip(), f"{exercise_id}: the notebook's cell differs from its starter"
        assert item.solution().strip() != item.starter().strip()
    per_notebook = {}
    for item in REGISTRY.values():
        per_notebook[item.notebook] = per_notebook.get(item.notebook, 0) + 1
    assert all(n >= 2 for n in per_notebook.values()), per_notebook


@pytest.fixture(scope="module")
def lab():
    with labkit.EmbeddedServer() as server:
        server.start()
        server.repository.write_config(labkit.model_config(
            "add_sub3", "python", [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])],
            [("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4]), ("OUTPUT2", "FP32", [4])]))
        yield server


def test_a_wrong_answer_gets_what_is_wrong_and_a_hint(lab):
    wrong = _body(REGISTRY["01-output2"].solution()).replace("a * b", "a + b")
    lab.python_model("add_sub3", wrong)
    verdict = exercises.check("01-output2", lab)
    assert not verdict.passed
    line = repr(verdict)
    assert line.startswith("not yet: 01-output2: OUTPUT2 was") and "that is INPUT0 + INPUT1" in line
    assert "Hint: multiply" in line and "\n" not in line and "Traceback" not in line


def test_a_right_answer_written_differently_passes(lab):
    different = ("import numpy as np\n" + _body(REGISTRY["01-output2"].solution())).replace(
        'pb_utils.Tensor("OUTPUT2", a * b)', 'pb_utils.Tensor("OUTPUT2", np.multiply(b, a, dtype=np.float32))')
    assert different != _body(REGISTRY["01-output2"].solution())
    lab.python_model("add_sub3", different)
    assert exercises.check("01-output2", lab).passed


def test_failures_of_the_persons_code_are_one_line_verdicts_too(lab):
    lab.python_model("add_sub3", _body(REGISTRY["01-output2"].solution()).replace(
        "responses = []", "responses = []\n        raise ValueError('oops in execute')"))
    verdict = exercises.check("01-output2", lab)
    assert not verdict.passed and "oops in execute" in verdict.problem and "\n" not in repr(verdict)
    missing = exercises.check("06-third-model", lab)  # nothing of notebook 06 was set up here
    assert not missing.passed and "'times_three' is not loaded" in missing.problem


def test_reset_restores_the_starters_and_keeps_a_backup(tmp_path):
    copy = tmp_path / "06_python_based_backend.ipynb"
    copy.write_text((NOTEBOOKS / copy.name).read_text())
    nb = nbformat.read(copy, as_version=4)
    edited = [c for c in nb.cells if workshop.exercise_of(c)]
    for cell in edited:
        cell.source = "# my work in progress"
    nbformat.write(nb, copy)
    assert workshop.main(["reset", "06", "--dir", str(tmp_path)]) == 0
    restored = nbformat.read(copy, as_version=4)
    for cell in (c for c in restored.cells if workshop.exercise_of(c)):
        assert cell.source == REGISTRY[workshop.exercise_of(cell)].starter() and cell.outputs == []
    (backup,) = tmp_path.glob("06_python_based_backend.*.bak.ipynb")
    assert "# my work in progress" in backup.read_text()


def _workshop(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit.cli", "workshop", "check", *args, "--dir", str(NOTEBOOKS)],
                          capture_output=True, text=True, timeout=3000)


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_with_the_solutions_every_exercise_passes():
    run = _workshop("--all", "--solutions")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith(("passed:", "not yet:"))]
    assert sorted(line.split(": ", 1)[1] for line in lines) == sorted(REGISTRY)
    assert all(line.startswith("passed:") for line in lines)


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_as_shipped_every_exercise_is_not_yet_with_a_hint():
    run = _workshop("--all")
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith(("passed:", "not yet:"))]
    assert sorted(line.split(": ")[1] for line in lines) == sorted(REGISTRY)
    for line in lines:
        assert line.startswith("not yet:") and " Hint: " in line, line
    assert "stopped early" not in run.stdout
