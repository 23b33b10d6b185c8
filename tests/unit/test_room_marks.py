"""What the board makes of a save that cannot be judged as it is, without an engine: an exercise tagged on
two cells, a notebook that is not one, a grader run that failed outside the participant's code (judged
again, then "could not judge"), the teacher's "judge again"; and how the page shows those marks apart."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import nbformat
import pytest

from labkit.course.exercises import REGISTRY
from labkit.errors import SubmissionError
from labkit.room.board import progress
from labkit.room.board.page import PageState, render_page
from labkit.room.grader.runner import judgement_of
from labkit.room.protocol import RoomVerdict, Submission, duplicated_problem, submission_of

NOTEBOOK = "01_python_backend.ipynb"
SHIPPED = nbformat.read(Path(__file__).resolve().parents[2] / "notebooks" / NOTEBOOK, as_version=4)


def _saved(copy_of: str = "") -> dict:
    """Notebook 01 as saved JSON; with ``copy_of``, that exercise's cell copied below itself, tags and all,
    with the solution in the copy."""
    nb = copy.deepcopy(SHIPPED)
    for at, cell in enumerate(nb.cells):
        if f"exercise:{copy_of}" in cell.metadata.get("tags", []):
            twin = copy.deepcopy(cell)
            twin.id, twin.source = "twin", REGISTRY[copy_of].solution()
            nb.cells.insert(at + 1, twin)
            break
    return json.loads(nbformat.writes(nb))


def test_an_exercise_tagged_on_two_cells_is_named_and_left_out():
    submission = submission_of("p01", NOTEBOOK, _saved("01-output2"))
    assert submission.duplicated == ("01-output2",) and "01-output2" not in submission.cells
    assert "01-bad-request" in submission.cells and not submission.untouched  # a copied starter is no untouched save
    assert "exercise:01-output2" in duplicated_problem("01-output2")
    assert submission_of("p01", NOTEBOOK, _saved()).untouched


@pytest.mark.parametrize("content", [[], {"cells": "x"}, "text", None, {"nbformat": 4}])
def test_json_that_is_no_notebook_is_unreadable(content):
    with pytest.raises(SubmissionError) as exc:
        submission_of("p01", NOTEBOOK, content)
    assert (exc.value.problem, exc.value.user, exc.value.notebook) == ("unreadable", "p01", NOTEBOOK)


def test_a_run_that_failed_outside_the_participants_code_is_judged_again_and_a_result_error_is_not():
    submission = Submission("p01", NOTEBOOK, {"01-output2": "x"})
    killed = judgement_of(submission, {}, "it ended without verdicts: no output", 1.0)
    assert killed.retry and killed.error and not any(r.passed for r in killed.results)
    cut = judgement_of(submission, {"results": [{"no": "exercise"}]}, "", 1.0)
    assert cut.retry  # a result that is not the grader's is the grader's failure
    inside = judgement_of(submission, {"results": [], "error": "no notebook 99.ipynb ships with labkit"}, "", 1.0)
    assert inside.error and not inside.retry  # the same answer at every try
    judged = judgement_of(submission, {"results": [RoomVerdict("01-output2", passed=True).to_json()]}, "", 1.0)
    assert not judged.retry and not judged.error and judged.results[0].passed


def test_could_not_judge_is_a_mark_apart_until_the_teacher_judges_again():
    table = progress.Progress(["p01"])
    table.record("p01", NOTEBOOK, 1.0, [RoomVerdict("01-output2", passed=True, digest="d1")])
    table.could_not_judge("p01", NOTEBOOK, 2.0, ["01-bad-request"], "its container was killed (3 tries)")
    mark = table.mark("p01", "01-bad-request")
    assert (mark.state, mark.problem, mark.digest) == (
        progress.COULD_NOT_JUDGE,
        "its container was killed (3 tries)",
        "",
    )
    assert table.table()["participants"]["p01"]["01-bad-request"] == "could not judge"
    assert not table.needs_check("p01", NOTEBOOK, 2.0)  # not judged again by itself: 3 tries were made
    assert table.changed("p01", {"01-bad-request": "mine", "01-output2": "x"}) == {
        "01-bad-request": progress.digest_of("mine"),
        "01-output2": progress.digest_of("x"),
    }
    table.forget("p01")  # the teacher's "judge again": every notebook, every exercise
    assert table.needs_check("p01", NOTEBOOK, 2.0) and table.mark("p01", "01-output2").state == progress.PASSED
    assert table.changed("p01", {"01-output2": "x"}) == {"01-output2": progress.digest_of("x")}


def test_an_unreadable_notebook_hides_its_marks_until_a_readable_save():
    table = progress.Progress(["p01"])
    table.record("p01", NOTEBOOK, 1.0, [RoomVerdict("01-output2", passed=True, digest="d1")])
    before = time.time()
    table.cannot_read("p01", NOTEBOOK, 2.0, "not valid JSON.")
    table.cannot_read("p01", NOTEBOOK, 3.0, "not valid JSON, again.")
    mark = table.mark("p01", "01-output2")
    assert mark.state == progress.UNREADABLE and mark.checked >= before  # since the first unreadable save
    assert progress.label(mark) == f"unreadable since {time.strftime('%H:%M', time.localtime(mark.checked))}"
    assert mark.problem == "not valid JSON, again. Its mark before: passed."
    assert table.mark("p01", "02-scale").state == progress.NOT_STARTED  # another notebook's exercise
    assert not table.needs_check("p01", NOTEBOOK, 3.0) and table.needs_check("p01", NOTEBOOK, 4.0)
    assert table.changed("p01", {"01-output2": "x"}) == {"01-output2": progress.digest_of("x")}
    again = progress.Progress.from_json(table.to_json())
    assert again.mark("p01", "01-output2") == mark
    table.record("p01", NOTEBOOK, 4.0, [])  # readable again, its cells as they were: the mark comes back
    assert table.mark("p01", "01-output2").state == progress.PASSED


def test_the_page_shows_such_marks_apart_and_offers_to_judge_again():
    table = progress.Progress(["p01", "p02"])
    table.could_not_judge("p01", NOTEBOOK, 2.0, ["01-output2"], "its container was killed (3 tries)")
    table.cannot_read("p02", NOTEBOOK, 2.0, "not valid JSON.")
    page = render_page(table, PageState("r1", "every saved notebook is judged"), "tok", "<input name='_xsrf'>")
    assert "<td class='could-not-judge' title='p01 · 01-output2: could not judge. its container was killed" in page
    assert "<td class='unreadable' title='p02 · 01-output2: unreadable since " in page and "not valid JSON." in page
    assert page.count("action='api/rejudge'") == 1 and "value='p01'" in page  # only where a run failed
    assert "'X-XSRFToken':\"tok\"" in page and "http-equiv='refresh'" not in page
    detail = render_page(table, PageState("r1", ""), "tok", "", user="p02")
    assert "action='api/rejudge'" in detail and "value='p02'" in detail
