"""The course's day, read from the lesson notebooks' own metadata: each notebook's ``labkit.minutes``
(its time with the exercises, at least what labkit.course.lesson_time's rule gives) and ``labkit.core`` (on
the day's core path, or optional). `labkit workshop plan` prints the schedule made from them, for whatever
notebooks the folder holds, and docs/workshop.md's table of notebooks is checked against the same metadata,
so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import nbformat

from ..errors import CourseError
from .catalogue import NOTEBOOKS, TAG_PREFIX
from .lesson_time import RULE, Needed, needed

NOTEBOOK_PATTERN = NOTEBOOKS


@dataclass(frozen=True)
class Lesson:
    """One notebook of the course."""

    number: str  # "01"
    name: str  # the file's stem, "01_python_backend"
    title: str  # its opening heading without the number
    minutes: int  # with its exercises
    core: bool  # on the day's core path (else optional)
    exercises: tuple[str, ...]  # the exercise ids its cells are tagged with, in order
    needed: Needed | None = None  # what the rule of labkit.course.lesson_time counts in it


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
    return Lesson(number, path.stem, first.split(" · ", 1)[1].strip(), minutes, core, exercises, needed(nb))


def lessons(folder: Path) -> list[Lesson]:
    """Every lesson notebook in ``folder`` (``NN_name.ipynb``), in order."""
    return [read_lesson(path) for path in sorted(Path(folder).glob(NOTEBOOK_PATTERN))]


@dataclass(frozen=True)
class Slot:
    """A stretch of the day: a lesson, or a pause or activity ("set-up", "break", "lunch", "own backends")
    when ``lesson`` is None."""

    start: int  # minutes after midnight
    minutes: int
    lesson: Lesson | None = None
    pause: str = ""

    @property
    def end(self) -> int:
        return self.start + self.minutes


@dataclass(frozen=True)
class DayShape:
    """What a teaching day holds besides the lessons, and the hours it must keep."""

    start: str = "09:00"
    end: str = "17:00"
    setup_minutes: int = 30  # installing, `labkit doctor`, the first `labkit.start()` on every machine
    break_minutes: int = 15  # one in the morning, one in the afternoon
    lunch_minutes: int = 45
    lunch_window: tuple[str, str] = ("12:00", "13:30")  # lunch starts within it
    own_minutes: int = 30  # the participants' own backends, at the end
    buffer_minutes: int = 20  # the day's last row ends this long before ``end``: what runs late has room


SETUP, BREAK, LUNCH, OWN = "set-up and checks", "break", "lunch", "your own backends"


def clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def minute_of_day(text: str) -> int:
    """Minutes after midnight of a time of day written HH:MM; ValueError for anything else."""
    hours, _, minutes = text.partition(":")
    if not (hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60):
        raise ValueError(f"a time of day is HH:MM, not {text!r}")
    return int(hours) * 60 + int(minutes)


def _nearest(candidates: list[int], at: float, boundary: list[int]) -> int:
    """The candidate lesson boundary (an index into ``boundary``, minutes into the lessons) nearest ``at``."""
    return min(candidates, key=lambda k: (abs(boundary[k] - at), k))


def day(lessons: list[Lesson], *, optional: bool = False, shape: DayShape | None = None, start: str = "") -> list[Slot]:
    """The day's schedule: set-up, the core lessons in order (every lesson with ``optional``), kept whole,
    a break between two lessons near the middle of the morning, lunch after the lesson whose end falls
    first in the lunch window (else the last before it), a break near the middle of the afternoon, and
    the participants' own backends last. Whether it keeps the day's hours: ``problems``."""
    shape = shape or DayShape()
    if start:
        shape = replace(shape, start=start)
    chosen = [lesson for lesson in lessons if lesson.core or optional]
    if not chosen:
        return []
    # boundary[k]: minutes of lessons before boundary k (0 = before the first lesson, n = after the last)
    boundary = [0]
    for lesson in chosen:
        boundary.append(boundary[-1] + lesson.minutes)
    n = len(chosen)
    first = minute_of_day(shape.start) + shape.setup_minutes
    window = [minute_of_day(t) for t in shape.lunch_window]
    # lunch at an inner boundary; the morning break comes before it
    inner = list(range(1, n)) or [n]
    starts = {k: first + boundary[k] + shape.break_minutes for k in inner}
    in_window = [k for k in inner if window[0] <= starts[k] <= window[1]]
    before = [k for k in inner if starts[k] < window[0]]
    lunch = in_window[0] if in_window else (before[-1] if before else inner[0])
    morning = _nearest(list(range(0, lunch)) or [0], boundary[lunch] / 2, boundary)
    afternoon_at = (boundary[lunch] + boundary[n]) / 2
    afternoon = _nearest(list(range(lunch + 1, n + 1)) or [n], afternoon_at, boundary)
    pauses = {morning: (BREAK, shape.break_minutes), lunch: (LUNCH, shape.lunch_minutes)}
    if afternoon != lunch:
        pauses.setdefault(afternoon, (BREAK, shape.break_minutes))
    slots = [Slot(minute_of_day(shape.start), shape.setup_minutes, pause=SETUP)]
    now = slots[0].end
    for k in range(n + 1):
        if k in pauses:
            name, length = pauses[k]
            slots.append(Slot(now, length, pause=name))
            now += length
        if k < n:
            slots.append(Slot(now, chosen[k].minutes, chosen[k]))
            now += chosen[k].minutes
    slots.append(Slot(now, shape.own_minutes, pause=OWN))
    return slots


def problems(slots: list[Slot], shape: DayShape | None = None) -> list[str]:
    """What keeps ``slots`` from the day's hours: lunch outside its window, a missing break, a late end."""
    shape = shape or DayShape()
    found = []
    lunches = [s for s in slots if s.pause == LUNCH]
    window = [minute_of_day(t) for t in shape.lunch_window]
    for slot in lunches:
        if not window[0] <= slot.start <= window[1]:
            found.append(
                f"lunch starts at {clock(slot.start)}, outside {shape.lunch_window[0]}-{shape.lunch_window[1]}"
            )
    if lunches:
        morning = [s for s in slots if s.pause == BREAK and s.start < lunches[0].start]
        afternoon = [s for s in slots if s.pause == BREAK and s.start > lunches[0].start]
        if not morning:
            found.append("no morning break")
        if not afternoon:
            found.append("no afternoon break")
    latest = minute_of_day(shape.end) - shape.buffer_minutes
    if slots and slots[-1].end > latest:
        found.append(
            f"ends at {clock(slots[-1].end)}, after {clock(latest)} ({shape.buffer_minutes} min before {shape.end} "
            "are kept for what runs late)"
        )
    return found


def _duration(minutes: int) -> str:
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def plan(lessons: list[Lesson], slots: list[Slot], shape: DayShape | None = None) -> str:
    """The schedule as a table, with the core path's total, whether the day keeps its hours, and the
    lessons left out of the day."""
    taught = [slot.lesson for slot in slots if slot.lesson]
    width = max([len(f"{lesson.number} {lesson.title}") for lesson in taught] + [len(OWN)])
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
    found = problems(slots, shape)
    head = (
        f"The day: {len(taught)} lessons, {_duration(sum(lesson.minutes for lesson in taught))} with their exercises, "
        f"{clock(slots[0].start)} to {clock(slots[-1].end)} with set-up, pauses and your own backends "
        f"(the core path alone: {len(core)} lessons, {_duration(sum(lesson.minutes for lesson in core))})."
    )
    verdict = ["", "It does not keep the day's hours: " + "; ".join(found) + "."] if found else []
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
    return "\n".join([head, "", *rows, *verdict, *tail])


def explain(lessons: list[Lesson]) -> str:
    """The rule that gives each lesson's least minutes, and its figures per lesson."""
    rows = [
        f"  {'lesson':7s} {'words':>6s} {'read':>5s} {'lines':>6s} {'read':>5s} {'run s':>6s} "
        f"{'exer.':>5s} {'min':>5s} {'sect.':>5s} {'min':>5s}  {'needed':>6s}  {'stated':>6s}"
    ]
    for lesson in lessons:
        if lesson.needed is None:
            continue
        n, parts = lesson.needed, lesson.needed.parts
        notes = [" LESS THAN THE RULE"] if lesson.minutes < n.minutes else []
        notes += [f" ({n.untimed} cells untimed)"] if n.untimed else []
        notes += [f" (no time with the answer: {', '.join(n.checks_unmeasured)})"] if n.checks_unmeasured else []
        rows.append(
            f"  {lesson.number:7s} {n.words:6d} {parts['reading']:5.1f} {n.lines:6d} {parts['lines']:5.1f} "
            f"{n.run_s:6.0f} {n.exercises:5d} {parts['exercises']:5.0f} {n.sections:5d} {parts['sections']:5.0f}  "
            f"{n.minutes:6d}  {lesson.minutes:6d}{''.join(notes)}"
        )
    return "\n".join([RULE, "", *rows])
