"""The course's day, read from the lesson notebooks' own metadata: each notebook's ``labkit.minutes``
(its time with the exercises) and ``labkit.core`` (on the day's core path, or optional).
`labkit workshop plan` prints the schedule made from them, and docs/workshop.md's table of notebooks is
checked against the same metadata, so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..errors import CourseError
from ..exercises import TAG_PREFIX

NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"
#: The core path must fit a teaching day: between these many minutes of lessons (exercises included).
CORE_RANGE_MIN = (4 * 60, 6 * 60)


@dataclass(frozen=True)
class Lesson:
    """One notebook of the course."""

    number: str  # "01"
    name: str  # the file's stem, "01_python_backend"
    title: str  # its opening heading without the number
    minutes: int  # with its exercises
    core: bool  # on the day's core path (else optional)
    exercises: tuple[str, ...]  # the exercise ids its cells are tagged with, in order


def read_lesson(path: Path) -> Lesson:
    """The lesson a notebook describes in its metadata and opening heading; CourseError when either is missing."""
    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata.get("labkit", {})
    minutes, core = meta.get("minutes"), meta.get("core")
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 5 <= minutes <= 240:
        raise CourseError(
            notebook=str(path),
            field="labkit.minutes",
            problem=f"must be a whole number of minutes from 5 to 240, not {minutes!r}",
        )
    if not isinstance(core, bool):
        raise CourseError(notebook=str(path), field="labkit.core", problem=f"must be true or false, not {core!r}")
    first = nb.cells[0].source.splitlines()[0] if nb.cells and nb.cells[0].cell_type == "markdown" else ""
    number = path.name[:2]
    if not first.startswith(f"# {number} · "):
        raise CourseError(
            notebook=str(path),
            field="title",
            problem=f"must open the first cell as '# {number} · <title>', not {first!r}",
        )
    exercises = tuple(
        tag[len(TAG_PREFIX) :]
        for cell in nb.cells
        for tag in cell.get("metadata", {}).get("tags", [])
        if tag.startswith(TAG_PREFIX)
    )
    return Lesson(number, path.stem, first.split(" · ", 1)[1].strip(), minutes, core, exercises)


def lessons(folder: Path) -> list[Lesson]:
    """Every lesson notebook in ``folder`` (``NN_name.ipynb``), in order."""
    return [read_lesson(path) for path in sorted(Path(folder).glob(NOTEBOOK_PATTERN))]


@dataclass(frozen=True)
class Slot:
    """A stretch of the day: a lesson, or a pause ("break", "lunch") when ``lesson`` is None."""

    start: int  # minutes after midnight
    minutes: int
    lesson: Lesson | None = None
    pause: str = ""

    @property
    def end(self) -> int:
        return self.start + self.minutes


def clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def minute_of_day(text: str) -> int:
    """Minutes after midnight of a time of day written HH:MM; ValueError for anything else."""
    hours, _, minutes = text.partition(":")
    if not (hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60):
        raise ValueError(f"a time of day is HH:MM, not {text!r}")
    return int(hours) * 60 + int(minutes)


def day(
    lessons: list[Lesson],
    *,
    start: str = "09:00",
    optional: bool = False,
    break_after: int = 90,
    break_minutes: int = 15,
    lunch_from: str = "12:00",
    lunch_minutes: int = 60,
) -> list[Slot]:
    """The day's schedule: the core lessons in order (every lesson with ``optional``), a break at the end of
    the lesson that brings ``break_after`` minutes of lessons since the last pause, and lunch in place of the
    first such break that falls at or after ``lunch_from``."""
    now, since_pause, lunched, slots = minute_of_day(start), 0, False, []
    chosen = [lesson for lesson in lessons if lesson.core or optional]
    for k, lesson in enumerate(chosen):
        slots.append(Slot(now, lesson.minutes, lesson))
        now += lesson.minutes
        since_pause += lesson.minutes
        if since_pause >= break_after and k < len(chosen) - 1:
            lunch = not lunched and now >= minute_of_day(lunch_from)
            lunched = lunched or lunch
            length = lunch_minutes if lunch else break_minutes
            slots.append(Slot(now, length, pause="lunch" if lunch else "break"))
            now += length
            since_pause = 0
    return slots


def _duration(minutes: int) -> str:
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def plan(lessons: list[Lesson], slots: list[Slot]) -> str:
    """The schedule as a table, with the core path's total and the lessons left out of the day."""
    taught = [slot.lesson for slot in slots if slot.lesson]
    width = max(len(f"{lesson.number} {lesson.title}") for lesson in taught)
    rows = [f"  {'start':5s}  {'end':5s}  {'lesson':{width}s}  {'min':>4s}  {'path':8s}  exercises"]
    for slot in slots:
        if slot.lesson is None:
            rows.append(f"  {clock(slot.start)}  {clock(slot.end)}  {slot.pause:{width}s}  {slot.minutes:4d}")
            continue
        lesson = slot.lesson
        rows.append(
            f"  {clock(slot.start)}  {clock(slot.end)}  {lesson.number + ' ' + lesson.title:{width}s}  "
            f"{lesson.minutes:4d}  {'core' if lesson.core else 'optional':8s}  {', '.join(lesson.exercises) or '-'}"
        )
    core = [lesson for lesson in lessons if lesson.core]
    head = (
        f"The day: {len(taught)} lessons, {_duration(sum(lesson.minutes for lesson in taught))} with their exercises, "
        f"{clock(slots[0].start)} to {clock(slots[-1].end)} with pauses "
        f"(the core path alone: {len(core)} lessons, {_duration(sum(lesson.minutes for lesson in core))})."
    )
    left = [lesson for lesson in lessons if lesson not in taught]
    tail = (
        [
            "",
            "Optional, not in this day (`--all` adds them): "
            + "; ".join(f"{lesson.number} {lesson.title} ({lesson.minutes} min)" for lesson in left),
        ]
        if left
        else []
    )
    return "\n".join([head, "", *rows, *tail])
