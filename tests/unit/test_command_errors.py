"""The errors of the workshop's, the room's and the lessons' commands carry what happened as fields: the
notebook asked for, the room's file, the process whose command line was read. No bare LabkitError."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import labkit.errors
from labkit.course import workshop
from labkit.course.lessons import server_flags
from labkit.room.board import progress


def test_a_notebook_name_that_matches_none_or_several_names_them(tmp_path):
    for name in ("01_a.ipynb", "01_b.ipynb", "02_c.ipynb"):
        (tmp_path / name).write_text("{}")
    with pytest.raises(labkit.errors.NotebookNotFoundError) as none:
        workshop.find_notebooks(["07"], tmp_path)
    assert (none.value.name, none.value.folder, none.value.matches) == ("07", str(tmp_path), [])
    assert none.value.known == ["01_a", "01_b", "02_c"]
    with pytest.raises(labkit.errors.NotebookNotFoundError) as several:
        workshop.find_notebooks(["01"], tmp_path)
    assert several.value.name == "01" and several.value.matches == ["01_a", "01_b"]


def test_plan_without_lessons_and_reset_without_names_change_nothing(tmp_path):
    with pytest.raises(labkit.errors.NotebookNotFoundError) as plan:
        workshop.main(["plan", "--dir", str(tmp_path)])
    assert plan.value.name == "" and plan.value.folder == str(tmp_path) and plan.value.known == []
    with pytest.raises(labkit.errors.OptionError) as reset:
        workshop.reset([], tmp_path)
    assert reset.value.option == "names" and reset.value.value == []
    assert list(tmp_path.iterdir()) == []


def test_the_rooms_files_name_the_path_and_the_problem(tmp_path):
    with pytest.raises(labkit.errors.RoomFileError) as no_room:
        progress.export_grades(tmp_path / "nope")
    assert (no_room.value.path, no_room.value.problem) == (str(tmp_path / "nope"), "no room")
    room = tmp_path / "room"
    room.mkdir()
    with pytest.raises(labkit.errors.RoomFileError) as unwritable:
        progress.export_grades(room, tmp_path / "no-such-folder" / "grades.csv")
    assert unwritable.value.path == str(tmp_path / "no-such-folder" / "grades.csv")
    assert unwritable.value.problem == "unwritable" and unwritable.value.detail
    path = progress.progress_file(room)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.raises(labkit.errors.RoomFileError) as unreadable:
        progress.load(room)
    assert (unreadable.value.path, unreadable.value.problem) == (str(path), "unreadable") and unreadable.value.detail


def test_tritons_command_line_needs_an_embedded_server():
    with pytest.raises(labkit.errors.SetupError) as info:
        server_flags.command_line(SimpleNamespace(runtime=SimpleNamespace()))
    assert info.value.missing == "a Triton process on this machine" and info.value.reason == "not an embedded server"
