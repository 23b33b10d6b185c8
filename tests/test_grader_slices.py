"""The grader judges an exercise from its slice of the notebook (labkit.room.grader.slices), not the whole
notebook: each exercise, judged alone with its reference solution, passes (its slice holds all it needs),
and started-but-wrong cells are "not yet". Run here with a real kernel and a real Triton, as the grader's
container runs them (labkit.room.grader.entry.judge_cells), on the shipped notebooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.course.exercises import REGISTRY
from labkit.room.grader.entry import judge_cells
from labkit.room.protocol import exercises_of

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WORKSHOP = [p.name for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if exercises_of(p.name)]


def _by_exercise(result: dict) -> dict[str, dict]:
    assert not result.get("error") and not result.get("skipped"), result
    return {r["exercise"]: r for r in result["results"]}


@pytest.mark.parametrize("exercise", sorted(REGISTRY), ids=str)
def test_an_exercise_judged_alone_from_its_slice_passes_with_its_solution(exercise):
    notebook = next(n for n in WORKSHOP if exercise in exercises_of(n))
    cells = {e: REGISTRY[e].starter() for e in exercises_of(notebook)}
    cells[exercise] = REGISTRY[exercise].solution()
    results = _by_exercise(judge_cells(notebook, cells, pristine=NOTEBOOKS, judge=(exercise,)))
    assert results[exercise]["passed"] and results[exercise]["started"], results[exercise]
    # the others are still their starters: "not started", and no check of theirs ran
    assert all(not r["started"] and not r["passed"] for e, r in results.items() if e != exercise)


@pytest.mark.parametrize("notebook", WORKSHOP)
def test_started_but_wrong_cells_are_not_yet(notebook):
    # a started cell that still does what the starter does (a comment added) is judged, and fails
    cells = {e: REGISTRY[e].starter() + "\n# tried something" for e in exercises_of(notebook)}
    if notebook.startswith("03_"):  # 03-delay's cell is a value: a comment would not start it
        cells["03-delay"] = "delay_us = 0   # tried"
    results = _by_exercise(judge_cells(notebook, cells, pristine=NOTEBOOKS))
    assert sorted(results) == exercises_of(notebook)
    assert all(r["started"] and not r["passed"] and r["problem"] for r in results.values()), results
