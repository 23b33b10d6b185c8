"""The course's shape: every lesson's metadata and opening cell, the day's schedule (`labkit workshop plan`),
and docs/workshop.md's table and schedule, which must say what the notebooks' metadata says."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from labkit.course import lesson_time, notebook_runner, schedule, workshop
from labkit.course.catalogue import OUTPUT_METADATA, Verdict
from labkit.course.exercises import REGISTRY
from labkit.errors import CourseError, OptionError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
GUIDE = ROOT / "docs" / "workshop.md"


def _lesson(number: str, minutes: int, core: bool = True) -> schedule.Lesson:
    return schedule.Lesson(number, f"{number}_x", f"lesson {number}", minutes, core, ())


def test_every_notebook_is_a_lesson_whose_opening_cell_says_what_its_metadata_says():
    lessons = schedule.lessons(NOTEBOOKS)
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


def test_the_core_day_keeps_the_hours_and_every_lesson_takes_at_least_what_the_rule_gives():
    lessons = schedule.lessons(NOTEBOOKS)
    slots = schedule.day(lessons)
    assert schedule.problems(slots) == []
    assert [s.pause for s in slots if s.lesson is None] == [
        schedule.SETUP,
        schedule.BREAK,
        schedule.LUNCH,
        schedule.BREAK,
        schedule.OWN,
    ] or [s.pause for s in slots if s.lesson is None].count(schedule.BREAK) == 2
    for lesson in lessons:
        assert lesson.needed is not None and lesson.needed.untimed == 0, lesson.name
        # every check counts its time with the answer: `workshop check --solutions --record-times` ran on it
        assert lesson.needed.checks_unmeasured == (), (lesson.name, lesson.needed.checks_unmeasured)
        assert lesson.minutes >= lesson.needed.minutes, (lesson.name, lesson.minutes, lesson.needed)
    core = [lesson for lesson in lessons if lesson.core]
    assert any(lesson.name == "17_real_models" for lesson in core)  # the real-model lesson is in the day


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
        for lesson in schedule.lessons(NOTEBOOKS)
    }
    assert rows == expected


def test_the_guide_shows_the_plan_that_the_command_prints(capsys):
    assert workshop.main(["plan", "--dir", str(NOTEBOOKS)]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    assert f"```\n{printed}\n```" in GUIDE.read_text()


def test_a_day_has_set_up_a_break_each_half_lunch_in_its_window_and_own_backends_last():
    lessons = [_lesson(f"{k:02d}", m) for k, m in enumerate((80, 70, 60, 50, 60), start=1)]
    slots = schedule.day(lessons, start="09:00")
    kinds = [(schedule.clock(s.start), s.pause or s.lesson.number, s.minutes) for s in slots]
    assert kinds == [
        ("09:00", schedule.SETUP, 30),
        ("09:30", "01", 80),
        ("10:50", schedule.BREAK, 15),
        ("11:05", "02", 70),
        ("12:15", schedule.LUNCH, 45),
        ("13:00", "03", 60),
        ("14:00", schedule.BREAK, 15),
        ("14:15", "04", 50),
        ("15:05", "05", 60),
        ("16:05", schedule.OWN, 30),
    ]
    assert schedule.problems(slots) == []  # it ends at 16:35: 25 min before 17:00 are left for what runs late
    assert all(a.end == b.start for a, b in zip(slots, slots[1:]))


def test_a_day_that_leaves_less_than_its_buffer_before_the_end_says_so():
    lessons = [_lesson(f"{k:02d}", m) for k, m in enumerate((80, 70, 60, 50, 70), start=1)]
    slots = schedule.day(lessons)
    assert schedule.clock(slots[-1].end) == "16:45"  # within 17:00, but not 20 min before it
    assert schedule.problems(slots) == ["ends at 16:45, after 16:40 (20 min before 17:00 are kept for what runs late)"]


def test_a_day_that_cannot_keep_the_hours_says_why():
    long_day = [_lesson(f"{k:02d}", 100) for k in range(1, 6)]
    found = schedule.problems(schedule.day(long_day))
    assert any(p.startswith("ends at") for p in found)
    late_lunch = [_lesson("01", 230), _lesson("02", 30)]
    assert any(p.startswith("lunch starts at 13:35") for p in schedule.problems(schedule.day(late_lunch)))
    text = schedule.plan(late_lunch, schedule.day(late_lunch))
    assert "It does not keep the day's hours: lunch starts at 13:35" in text


def test_any_set_of_notebooks_makes_a_day_optional_ones_only_with_all():
    lessons = [_lesson("01", 90), _lesson("02", 80), _lesson("03", 60), _lesson("09", 60)]
    lessons += [_lesson("11", 40, core=False), _lesson("12", 45, core=False)]
    core = schedule.day(lessons)
    assert [s.lesson.number for s in core if s.lesson] == ["01", "02", "03", "09"]
    assert schedule.problems(core) == []
    every = schedule.day(lessons, optional=True)
    assert [s.lesson.number for s in every if s.lesson] == ["01", "02", "03", "09", "11", "12"]
    assert schedule.day([_lesson("11", 40, core=False)]) == []
    one = schedule.day([_lesson("01", 60)])
    assert [s.pause or s.lesson.number for s in one] == [
        schedule.SETUP,
        schedule.BREAK,
        "01",
        schedule.LUNCH,
        schedule.OWN,
    ]


def test_optional_lessons_join_the_day_only_when_asked():
    lessons = [_lesson("01", 30), _lesson("02", 30, core=False), _lesson("03", 30)]
    assert [s.lesson.number for s in schedule.day(lessons) if s.lesson] == ["01", "03"]
    assert [s.lesson.number for s in schedule.day(lessons, optional=True) if s.lesson] == ["01", "02", "03"]
    text = schedule.plan(lessons, schedule.day(lessons))
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
        schedule.read_lesson(path)
    assert (caught.value.notebook, caught.value.field) == (str(path), field)


def test_a_notebook_whose_opening_is_not_its_numbered_title_is_refused(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A lesson")])
    nb.metadata["labkit"] = {"minutes": 30, "core": True}
    path = tmp_path / "02_lesson.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(CourseError) as caught:
        schedule.read_lesson(path)
    assert caught.value.field == "title"


def test_the_rule_counts_words_lines_run_time_and_exercises(tmp_path):
    code = nbformat.v4.new_code_cell("x = 1\n\nprint(x)\n", metadata={"tags": ["exercise:01-output2"]})
    code.outputs = [nbformat.v4.new_output("stream", text="1\n2\n")]
    code.metadata["execution"] = {
        "iopub.execute_input": "2026-11-27T10:00:00.000000Z",
        "shell.execute_reply": "2026-11-27T10:00:30.000000Z",
    }
    untimed = nbformat.v4.new_code_cell("y = 2")
    words = " ".join(["word"] * 300)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(words), code, untimed])
    needed = lesson_time.needed(nb)
    assert (needed.words, needed.lines, needed.run_s, needed.untimed, needed.exercises) == (300, 5, 30.0, 1, 1)
    # 2 min reading + 5 lines x 8 s + 30 s running + 12 min: 15.17 -> 16
    assert needed.minutes == 16


def _timed(cell: nbformat.NotebookNode, seconds: int) -> nbformat.NotebookNode:
    cell.metadata["execution"] = {
        "iopub.execute_input": "2026-11-27T10:00:00.000000Z",
        "shell.execute_reply": f"2026-11-27T10:00:{seconds:02d}.000000Z",
    }
    return cell


def _check_cell(exercise_id: str, seconds: int) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(f"labkit.exercises.check({exercise_id!r}, lab)")
    verdict = {"exercise": exercise_id, "passed": False, "problem": "p", "hint": "h", "rule": ""}
    cell.outputs = [
        nbformat.v4.new_output(
            "execute_result", data={"text/plain": "not yet"}, metadata={OUTPUT_METADATA: verdict}, execution_count=1
        )
    ]
    return _timed(cell, seconds)


def test_the_rule_counts_sections_and_each_check_with_its_answer():
    sections = nbformat.v4.new_markdown_cell("## One\n\ntext\n\n### not a section\n\n## Two")
    exercise = _timed(nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["exercise:01-output2"]}), 1)
    nb = nbformat.v4.new_notebook(
        cells=[sections, exercise, _check_cell("01-output2", 2), _check_cell("01-bad-request", 3)]
    )
    unmeasured = lesson_time.needed(nb)
    assert (unmeasured.sections, unmeasured.run_s) == (2, 6.0)
    assert unmeasured.checks_unmeasured == ("01-output2", "01-bad-request")
    assert unmeasured.parts["sections"] == 2 * lesson_time.MINUTES_PER_SECTION
    nb.metadata["labkit"] = {lesson_time.CHECK_TIMES: {"01-output2": 50.0}}
    measured = lesson_time.needed(nb)
    # the check of 01-output2 counts 50 s, its answer's, not the 2 s its starter's failure took
    assert measured.run_s == 1 + 50 + 3 and measured.checks_unmeasured == ("01-bad-request",)
    assert lesson_time.check_times(nb.cells) == {"01-output2": 2.0, "01-bad-request": 3.0}


def test_check_times_are_recorded_only_with_the_solutions_and_only_from_a_run_that_passed(tmp_path):
    path = tmp_path / "06_python_based_backend.ipynb"
    shutil.copy(NOTEBOOKS / path.name, path)
    before = path.read_bytes()
    with pytest.raises(OptionError) as refused:
        workshop.main(["check", "06", "--record-times", "--dir", str(tmp_path)])
    assert refused.value.option == "--record-times"
    failed = notebook_runner.NotebookRun(path, [Verdict("06-offset", False, "wrong")], check_s={"06-offset": 9.0})
    workshop.record_times(failed)
    assert path.read_bytes() == before
    passed = notebook_runner.NotebookRun(path, [Verdict("06-offset", True)], check_s={"06-offset": 9.0})
    workshop.record_times(passed)
    assert nbformat.read(path, as_version=4).metadata["labkit"][lesson_time.CHECK_TIMES] == {"06-offset": 9.0}


def test_plan_explains_its_rule_for_every_lesson(capsys):
    assert workshop.main(["plan", "--dir", str(NOTEBOOKS), "--explain"]) == 0
    printed = capsys.readouterr().out
    assert lesson_time.RULE in printed
    for lesson in schedule.lessons(NOTEBOOKS):
        assert any(line.startswith(f"  {lesson.number} ") for line in printed.splitlines()), lesson.name
    assert "LESS THAN THE RULE" not in printed


def test_plan_refuses_a_time_that_is_not_one(capsys):
    with pytest.raises(SystemExit) as caught:
        workshop.main(["plan", "--dir", str(NOTEBOOKS), "--start", "25:00"])
    assert caught.value.code == 2


def _without_exercises() -> set[str]:
    return {lesson.number for lesson in schedule.lessons(NOTEBOOKS) if not lesson.exercises}


def test_the_readme_and_the_guide_name_exactly_the_notebooks_without_exercises():
    readme = (ROOT / "README.md").read_text()
    said = readme.split("Most notebooks hold *your turn* exercises (", 1)[1].split("have none)", 1)[0]
    assert set(re.findall(r"`(\d\d)`", said)) == _without_exercises()
    said = GUIDE.read_text().split("*your turn*\nexercises and check them (", 1)[1].split("have none)", 1)[0]
    assert set(re.findall(r"`(\d\d)`", said)) == _without_exercises()


def test_the_guide_says_what_every_exercises_check_runs():
    text = GUIDE.read_text().split("## What the checks run", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\d\d-[a-z0-9-]+)` \|", text, re.M)
    assert sorted(rows) == sorted(REGISTRY)


def test_the_optional_lessons_are_more_than_a_second_day_as_the_guide_says():
    lessons = schedule.lessons(NOTEBOOKS)
    optional = sum(lesson.minutes for lesson in lessons if not lesson.core)
    assert optional > sum(lesson.minutes for lesson in lessons if lesson.core)
    assert "not a second day: together they take longer\nthan the core path" in GUIDE.read_text()
