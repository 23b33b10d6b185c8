"""The course's shape: every lesson's metadata and opening cell, the day's schedule (`labkit workshop plan`),
and docs/workshop.md's table and schedule, which must say what the notebooks' metadata says."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from labkit.errors import CourseError
from labkit.exercises import REGISTRY
from labkit.teach import course, workshop

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
GUIDE = ROOT / "docs" / "workshop.md"


def _lesson(number: str, minutes: int, core: bool = True) -> course.Lesson:
    return course.Lesson(number, f"{number}_x", f"lesson {number}", minutes, core, ())


def test_every_notebook_is_a_lesson_whose_opening_cell_says_what_its_metadata_says():
    lessons = course.lessons(NOTEBOOKS)
    assert [lesson.name for lesson in lessons] == sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    for lesson in lessons:
        opening = nbformat.read(NOTEBOOKS / f"{lesson.name}.ipynb", as_version=4).cells[0].source
        path = "on the day's core path" if lesson.core else "optional"
        assert f"**Time** {lesson.minutes} min with the exercises · {path}" in opening, lesson.name
        for part in ("**You will learn** ", "**Assumes** ", "**Triton's documents (r23.12)** "):
            assert part in opening, (lesson.name, part)
        links = re.findall(r"\]\((https://[^)]+)\)", opening.split("**Triton's documents (r23.12)**", 1)[1])
        assert links and any("/r23.12/" in link for link in links), lesson.name
        assert all(exercise in REGISTRY for exercise in lesson.exercises)


def test_the_core_path_fits_a_day():
    core = sum(lesson.minutes for lesson in course.lessons(NOTEBOOKS) if lesson.core)
    low, high = course.CORE_RANGE_MIN
    assert low <= core <= high


def test_the_guide_lists_every_lesson_with_its_time_path_and_exercises():
    rows = {}
    for line in GUIDE.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"`\d\d_\w+`", cells[0]):
            rows[cells[0].strip("`")] = (cells[2], cells[3], cells[4])
    expected = {
        lesson.name: (
            f"{lesson.minutes} min",
            "core" if lesson.core else "optional",
            ", ".join(f"`{e}`" for e in lesson.exercises) or "none",
        )
        for lesson in course.lessons(NOTEBOOKS)
    }
    assert rows == expected


def test_the_guide_shows_the_plan_that_the_command_prints(capsys):
    assert workshop.main(["plan", "--dir", str(NOTEBOOKS)]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    assert f"```\n{printed}\n```" in GUIDE.read_text()


def test_a_day_pauses_after_ninety_minutes_and_lunches_once_after_noon():
    lessons = [_lesson(f"{k:02d}", 50) for k in range(1, 8)]
    slots = course.day(lessons, start="09:00")
    pauses = [(course.clock(s.start), s.pause, s.minutes) for s in slots if s.lesson is None]
    assert pauses == [("10:40", "break", 15), ("12:35", "lunch", 60), ("15:15", "break", 15)]
    assert slots[-1].lesson is lessons[-1] and course.clock(slots[-1].end) == "16:20"
    assert all(a.end == b.start for a, b in zip(slots, slots[1:]))


def test_optional_lessons_join_the_day_only_when_asked():
    lessons = [_lesson("01", 30), _lesson("02", 30, core=False), _lesson("03", 30)]
    assert [s.lesson.number for s in course.day(lessons) if s.lesson] == ["01", "03"]
    assert [s.lesson.number for s in course.day(lessons, optional=True) if s.lesson] == ["01", "02", "03"]
    text = course.plan(lessons, course.day(lessons))
    assert "02 lesson 02 (30 min)" in text.splitlines()[-1]


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ({}, "labkit.minutes"),
        ({"minutes": "45", "core": True}, "labkit.minutes"),
        ({"minutes": True, "core": True}, "labkit.minutes"),
        ({"minutes": 0, "core": True}, "labkit.minutes"),
        ({"minutes": 45}, "labkit.core"),
        ({"minutes": 45, "core": "yes"}, "labkit.core"),
    ],
)
def test_a_notebook_without_usable_metadata_is_refused_naming_the_field(tmp_path, meta, field):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 01 · A lesson")])
    nb.metadata["labkit"] = meta
    path = tmp_path / "01_lesson.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(CourseError) as caught:
        course.read_lesson(path)
    assert (caught.value.notebook, caught.value.field) == (str(path), field)


def test_a_notebook_whose_opening_is_not_its_numbered_title_is_refused(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A lesson")])
    nb.metadata["labkit"] = {"minutes": 30, "core": True}
    path = tmp_path / "02_lesson.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(CourseError) as caught:
        course.read_lesson(path)
    assert caught.value.field == "title"


def test_plan_refuses_a_time_that_is_not_one(capsys):
    with pytest.raises(SystemExit) as caught:
        workshop.main(["plan", "--dir", str(NOTEBOOKS), "--start", "25:00"])
    assert caught.value.code == 2
