"""The cells a grader runs to judge some of a notebook's exercises, instead of the whole notebook.

A lesson's cells measure, plot and wait: running all of notebook 01 costs seconds that a verdict does not
need. An exercise needs the cells tagged ``grader-setup`` (the first one starts the lab), those tagged
``grader-setup:<its id>`` (a model of an earlier section that it uses), the code cells of its own section
before it (the heading above it starts the section: they write the config it fills in), its cell and its
check, the code cell right after it. The slice keeps the notebook's order.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from ...course.catalogue import TAG_PREFIX

SETUP_TAG = "grader-setup"


def _tags(cell: Any) -> list[str]:
    return list((cell.get("metadata") or {}).get("tags", []) or [])


def exercise_index(cells: list[Any]) -> dict[str, int]:
    """``{exercise id: index of its cell}``."""
    return {t[len(TAG_PREFIX) :]: i for i, c in enumerate(cells) for t in _tags(c) if t.startswith(TAG_PREFIX)}


def _is_heading(cell: Any) -> bool:
    source = cell.get("source", "")
    text = "".join(source) if isinstance(source, list) else str(source)
    return cell.get("cell_type") == "markdown" and text.lstrip().startswith("#")


def cells_for(cells: list[Any], exercises: Iterable[str]) -> list[int]:
    """The indexes of the cells that judge ``exercises`` (ids the notebook does not hold are ignored)."""
    where = exercise_index(cells)
    keep = {i for i, c in enumerate(cells) if SETUP_TAG in _tags(c)}
    for exercise in exercises:
        if exercise not in where:
            continue
        keep.update(i for i, c in enumerate(cells) if f"{SETUP_TAG}:{exercise}" in _tags(c))
        at = where[exercise]
        start = max((i for i in range(at) if _is_heading(cells[i])), default=0)
        keep.update(i for i in range(start, at) if cells[i].get("cell_type") == "code")
        keep.add(at)
        if at + 1 < len(cells) and cells[at + 1].get("cell_type") == "code":
            keep.add(at + 1)
    return sorted(keep)


def sliced(notebook: Any, exercises: Iterable[str]) -> Any:
    """A copy of ``notebook`` (an nbformat node) holding only the cells that judge ``exercises``."""
    small = copy.deepcopy(notebook)
    small.cells = [small.cells[i] for i in cells_for(notebook.cells, exercises)]
    return small
