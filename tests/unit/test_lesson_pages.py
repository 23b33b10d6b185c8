"""A lesson's page as the site shows it (labkit.course.lesson_pages), made from small notebooks: the run box
after the opening cell, an exercise cell as its starter (a saved solution and its outputs never reach the
page), the exercise's hint after its check, widgets' static fallbacks; the saved notebook is left as it was."""

from __future__ import annotations

import nbformat
import pytest

from labkit.course import lesson_pages
from labkit.course.exercises import REGISTRY
from labkit.errors import UnknownExerciseError

EXERCISE = "01-output2"
PNG = "iVBORw0KGgo="  # a PNG's signature, base64: the page keeps the output, nothing decodes it here


def _lesson(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · A lesson\n**Time** 5 min"), *cells]
    return nb


def _exercise(source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source, outputs=[nbformat.v4.new_output("stream", text="what it printed\n")])
    cell.metadata["tags"] = [f"exercise:{EXERCISE}"]
    return cell


def _check() -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(f'labkit.exercises.check("{EXERCISE}", lab)')


def _widget(**data: object) -> nbformat.NotebookNode:
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    output = nbformat.v4.new_output("display_data", data={lesson_pages.WIDGET_VIEW: view, **data})
    return nbformat.v4.new_code_cell("dash = labkit.Dashboard(lab, 'm')", outputs=[output])


def test_the_run_box_follows_the_opening_cell_and_names_the_notebook():
    page = lesson_pages.page(_lesson(nbformat.v4.new_code_cell("x = 1")), "01_lesson")
    assert page.cells[0].source.startswith("# 01 · A lesson")
    box = page.cells[1].source
    assert "Run this lesson" in box and "`make lab`" in box and "`01_lesson.ipynb`" in box and "workshop room" in box
    assert "workshop check" not in box  # a lesson without exercises has nothing to check


def test_a_saved_solution_gives_way_to_the_starter_and_its_outputs_go_with_it():
    solution = REGISTRY[EXERCISE].solution()
    saved = _lesson(_exercise(solution), _check())
    page = lesson_pages.page(saved, "01_lesson")
    cell = next(c for c in page.cells if f"exercise:{EXERCISE}" in c.metadata.get("tags", []))
    assert cell.source == REGISTRY[EXERCISE].starter().rstrip() and cell.outputs == []
    answer = "np.sum(a > b, axis=1, keepdims=True).astype(np.int32)"
    assert answer in solution and not any(answer in c.source for c in page.cells)
    assert saved.cells[1].source == solution and saved.cells[1].outputs  # the saved notebook is untouched
    assert "`labkit workshop check 01`" in page.cells[1].source


def test_a_saved_starter_keeps_its_outputs():
    page = lesson_pages.page(_lesson(_exercise(REGISTRY[EXERCISE].starter())), "01_lesson")
    cell = next(c for c in page.cells if c.metadata.get("tags"))
    assert [o.text for o in cell.outputs] == ["what it printed\n"]


def test_the_hint_follows_the_check_cell_or_else_the_exercise_cell():
    hint = lesson_pages.literal(REGISTRY[EXERCISE].hint)
    checked = lesson_pages.page(_lesson(_exercise("starter"), nbformat.v4.new_code_cell("x = 1"), _check()), "01_x")
    sources = [c.source for c in checked.cells]
    assert hint in sources[5] and sources[5].startswith("```{hint}") and "exercises.check" in sources[4]
    unchecked = lesson_pages.page(_lesson(_exercise("starter"), nbformat.v4.new_code_cell("x = 1")), "01_x")
    assert hint in unchecked.cells[3].source and unchecked.cells[4].source == "x = 1"


def test_a_widget_shows_its_static_frame_or_says_it_needs_the_lab():
    saved = _lesson(
        _widget(**{"image/png": PNG, "text/plain": "<labkit Dashboard>"}), _widget(**{"text/plain": "VBox()"})
    )
    saved.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    page = lesson_pages.page(saved, "03_x")
    framed, bare = (cell.outputs[0].data for cell in page.cells[2:])
    assert framed == {"image/png": PNG, "text/plain": "<labkit Dashboard>"}
    assert bare == {"text/plain": lesson_pages.NO_FALLBACK}
    assert "widgets" not in page.metadata and "widgets" in saved.metadata


def test_an_unknown_exercise_tag_is_an_error_naming_it():
    cell = nbformat.v4.new_code_cell("pass")
    cell.metadata["tags"] = ["exercise:99-nothing"]
    with pytest.raises(UnknownExerciseError) as caught:
        lesson_pages.page(_lesson(cell), "99_x")
    assert caught.value.exercise == "99-nothing" and caught.value.notebook == "99_x.ipynb"
    assert EXERCISE in caught.value.known


def test_page_source_reads_and_writes_a_notebooks_json():
    text = nbformat.writes(_lesson(nbformat.v4.new_code_cell("x = 1")))
    page = nbformat.reads(lesson_pages.page_source(text, "01_lesson"), as_version=4)
    assert [c.source for c in page.cells][2] == "x = 1" and "Run this lesson" in page.cells[1].source


def test_a_hint_shows_as_written():
    assert lesson_pages.literal("a *b* `c` <d> x_y [e] \\") == "a \\*b\\* \\`c\\` \\<d\\> x\\_y \\[e\\] \\\\"
