"""The least time a lesson takes, by a rule an instructor can check against the notebook itself: reading its
text, reading every line it shows (the code cells and what they print, printed sources included), waiting for
its cells to run, doing its exercises, and the instructor's talk and the room's questions, a few minutes per
section. A check cell counts the time it takes with the reference answer (``labkit.check_s`` in the notebook's
metadata, recorded by `labkit workshop check --solutions --record-times`), not the seconds its failing starter
took when the notebook was saved. `labkit workshop plan --explain` prints the rule and each lesson's figures; a
notebook's ``labkit.minutes`` may be more than the rule gives, never less (tests/unit/test_course.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .catalogue import OUTPUT_METADATA, TAG_PREFIX

WORDS_PER_MINUTE = 150  # reading the markdown cells
SECONDS_PER_LINE = 8  # reading one line shown: a code cell's line, or a line it printed
MINUTES_PER_EXERCISE = 12  # reading the task, writing, running, reading the check's answer once or twice
MINUTES_PER_SECTION = 3  # the instructor's talk and the room's questions, per `## ` heading
CHECK_TIMES = "check_s"  # the key, under the notebook's ``labkit`` metadata, of each check's time with its answer

RULE = (
    f"A lesson's minutes are at least: its markdown's words at {WORDS_PER_MINUTE} a minute, "
    f"{SECONDS_PER_LINE} s for every non-blank line shown (each code cell's source and the text it printed, "
    f"printed sources included), its cells' own run time (recorded in the saved notebook when it was executed; "
    f"a check cell's with the reference answer, recorded by `labkit workshop check --solutions --record-times`), "
    f"{MINUTES_PER_EXERCISE} min per exercise, and {MINUTES_PER_SECTION} min per section (a markdown line that "
    "starts with '## ') for talk and questions; rounded up to whole minutes. A notebook's labkit.minutes may be "
    "more, never less."
)


@dataclass(frozen=True)
class Needed:
    """What a notebook holds that takes time, and the minutes the rule gives for it."""

    words: int  # in markdown cells
    lines: int  # non-blank lines of code cells and of their text outputs
    run_s: float  # the code cells' run time, as recorded when the notebook was executed
    untimed: int  # code cells without a recorded run time (counted as 0 s)
    exercises: int
    sections: int = 0  # markdown lines that start with "## "
    checks_unmeasured: tuple[str, ...] = ()  # exercises whose check has no time recorded with the answer

    @property
    def parts(self) -> dict[str, float]:
        """Minutes per part of the rule."""
        return {
            "reading": self.words / WORDS_PER_MINUTE,
            "lines": self.lines * SECONDS_PER_LINE / 60,
            "running": self.run_s / 60,
            "exercises": float(self.exercises * MINUTES_PER_EXERCISE),
            "sections": float(self.sections * MINUTES_PER_SECTION),
        }

    @property
    def minutes(self) -> int:
        return math.ceil(sum(self.parts.values()) - 1e-9)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _shown_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _printed(output: Any) -> str:
    if output.get("output_type") == "stream":
        return _text(output.get("text"))
    if output.get("output_type") in ("execute_result", "display_data"):
        return _text((output.get("data") or {}).get("text/plain"))
    return _text(output.get("traceback") and "\n".join(output["traceback"]))


def _run_s(cell: Any) -> float | None:
    """The cell's run time from the timestamps nbclient records (``metadata.execution``), or None."""
    execution = (cell.get("metadata") or {}).get("execution") or {}
    began, ended = execution.get("iopub.execute_input"), execution.get("shell.execute_reply")
    if not (began and ended):
        return None
    try:
        seconds = (
            datetime.fromisoformat(ended.replace("Z", "+00:00")) - datetime.fromisoformat(began.replace("Z", "+00:00"))
        ).total_seconds()
    except ValueError:
        return None
    return max(seconds, 0.0)


def checked(cell: Any) -> str | None:
    """The exercise whose verdict a check cell displayed (from its output's metadata), or None."""
    for output in cell.get("outputs", []):
        verdict = (output.get("metadata") or {}).get(OUTPUT_METADATA)
        if isinstance(verdict, dict) and verdict.get("exercise"):
            return str(verdict["exercise"])
    return None


def check_times(cells: list[Any]) -> dict[str, float]:
    """Each check cell's run time in an executed notebook, by the exercise it judged."""
    found = {}
    for cell in cells:
        exercise, seconds = checked(cell), _run_s(cell)
        if exercise and seconds is not None and not _is_exercise(cell):
            found[exercise] = round(seconds, 1)
    return found


def _is_exercise(cell: Any) -> bool:
    return any(tag.startswith(TAG_PREFIX) for tag in (cell.get("metadata") or {}).get("tags", []))


def needed(notebook: Any) -> Needed:
    """The rule's figures for ``notebook`` (an nbformat node, as saved with its outputs)."""
    words = lines = untimed = exercises = sections = 0
    run_s = 0.0
    recorded = ((notebook.get("metadata") or {}).get("labkit") or {}).get(CHECK_TIMES) or {}
    unmeasured = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            words += len(re.findall(r"\S+", _text(cell.source)))
            sections += sum(1 for line in _text(cell.source).splitlines() if line.startswith("## "))
            continue
        if cell.cell_type != "code":
            continue
        lines += _shown_lines(_text(cell.source)) + sum(_shown_lines(_printed(o)) for o in cell.get("outputs", []))
        judged = checked(cell) if not _is_exercise(cell) else None
        seconds = _run_s(cell)
        if judged is not None and judged in recorded:
            seconds = float(recorded[judged])  # the check as it runs with an answer, not the starter's quick failure
        elif judged is not None:
            unmeasured.append(judged)
        if seconds is None:
            untimed += 1
        else:
            run_s += seconds
        exercises += _is_exercise(cell)
    return Needed(words, lines, run_s, untimed, exercises, sections, tuple(unmeasured))
