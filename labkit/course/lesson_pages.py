"""A lesson notebook as the course's website shows it (`make site`; docs/conf.py hands each lesson's saved
text to ``page_source``): the notebook as saved, plus what a reader needs, minus what a participant should
not be handed.

- After the opening cell (title, time, objectives, Triton's r23.12 documents): how to run the lesson.
- An exercise cell (tagged ``exercise:<id>``) shows its starter, as `labkit workshop reset` puts it back; its
  saved outputs stay only when the saved cell is that starter, so a notebook saved with a solution in it
  shows neither the solution nor what it printed. Solutions live in labkit/course/exercises/cells/ only.
- After each exercise's check cell: the exercise's hint. The check's verdict, as saved, is what running the
  starter answers; the check's inputs and answer corpus stay in labkit and the tests.
- Widgets: a saved ipywidgets view gives way to its static fallback (the Dashboard keeps its last frame as a
  PNG in the same output); a view without one says so in words. The notebook's widget state goes too: a
  page has no kernel to drive it, and ipywidgets' page scripts would come from a CDN.

Nothing else is removed: cells tagged ``grader-setup`` are lesson cells like any other.
"""

from __future__ import annotations

import re

import nbformat

from ..errors import UnknownExerciseError
from .catalogue import REGISTRY, TAG_PREFIX

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: What a page can show of an output without a kernel, in the order MyST-NB prefers them.
STATIC_MIMES = ("text/html", "image/svg+xml", "image/png", "image/gif", "image/jpeg")
NO_FALLBACK = "(an interactive widget: it shows when the notebook runs in the lab)"


def page_source(text: str, name: str) -> str:
    """``page`` of a notebook's saved JSON text, as JSON text."""
    return nbformat.writes(page(nbformat.reads(text, as_version=4), name))


def page(notebook: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The page of lesson ``name`` (its file's stem, "01_python_backend") made from its saved notebook."""
    nb = nbformat.from_dict(notebook)  # a deep copy: the saved notebook stays as it is
    nb.metadata.pop("widgets", None)
    exercises = []
    for cell in nb.cells:
        exercise = _exercise_of(cell, name)
        if exercise is not None:
            _show_starter(cell, exercise)
            exercises.append(exercise)
        for output in cell.get("outputs", []):
            _static(output)
    for exercise in exercises:
        nb.cells.insert(_check_cell(nb.cells, exercise) + 1, _hint(exercise))
    nb.cells.insert(1, _how_to_run(name, bool(exercises)))
    return nb


def _exercise_of(cell: nbformat.NotebookNode, name: str) -> str | None:
    ids = [tag[len(TAG_PREFIX) :] for tag in cell.get("metadata", {}).get("tags", []) if tag.startswith(TAG_PREFIX)]
    if not ids:
        return None
    if ids[0] not in REGISTRY:
        raise UnknownExerciseError(exercise=ids[0], notebook=f"{name}.ipynb", known=sorted(REGISTRY))
    return ids[0]


def _show_starter(cell: nbformat.NotebookNode, exercise: str) -> None:
    starter = REGISTRY[exercise].starter()
    if cell.source.rstrip() != starter.rstrip():
        cell.outputs = []
    cell.source = starter.rstrip()


def _check_cell(cells: list[nbformat.NotebookNode], exercise: str) -> int:
    """The index of the cell that checks ``exercise``: the first after its exercise cell that calls its check,
    else the exercise cell itself."""
    start = next(k for k, cell in enumerate(cells) if _tagged(cell, exercise))
    call = re.compile(r"exercises\.check\(\s*[\"']" + re.escape(exercise) + r"[\"']")
    return next((k for k in range(start, len(cells)) if call.search(cells[k].source)), start)


def _tagged(cell: nbformat.NotebookNode, exercise: str) -> bool:
    return TAG_PREFIX + exercise in cell.get("metadata", {}).get("tags", [])


def _static(output: nbformat.NotebookNode) -> None:
    data = output.get("data")
    if not data or WIDGET_VIEW not in data:
        return
    del data[WIDGET_VIEW]
    if not any(mime in data for mime in STATIC_MIMES):
        data["text/plain"] = NO_FALLBACK


def _hint(exercise: str) -> nbformat.NotebookNode:
    ex = REGISTRY[exercise]
    return nbformat.v4.new_markdown_cell(f"```{{hint}}\n**{literal(ex.title)}** (`{ex.id}`): {literal(ex.hint)}\n```")


def literal(text: str) -> str:
    """Plain text (a hint is written for a terminal) as Markdown that shows it as it is."""
    return re.sub(r"([\\`*_\[\]<>|~{}])", r"\\\1", text)


def _how_to_run(name: str, exercises: bool) -> nbformat.NotebookNode:
    check = (
        f" `labkit workshop check {name[:2]}` then says, per exercise, *passed* or *not yet* with a hint."
        if exercises
        else ""
    )
    return nbformat.v4.new_markdown_cell(
        "```{admonition} Run this lesson\n:class: tip\n"
        f"**On your machine**: in a checkout of labkit, `make lab` sets up the lab (labkit, JupyterLab and Triton "
        f"23.12) and opens JupyterLab on `notebooks/`: open `{name}.ipynb` and run its cells from the top.{check}\n\n"
        "**In a workshop room**: open the link your teacher gives you; the notebook is already in your lab, and "
        "the teacher's board sees each check you run.\n```"
    )
