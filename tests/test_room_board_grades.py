"""The room's progress table and `labkit room grades --csv` (no engine needed: the marks are recorded
as a grader run returns them)."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest

from labkit import cli
from labkit.errors import BoardError
from labkit.room import RoomSettings
from labkit.room.board import progress
from labkit.room.board.progress import board_table
from labkit.room.protocol import RoomVerdict
from labkit.room.settings import volume_name

SOLVED = RoomVerdict("01-output2", passed=True)
WRONG = RoomVerdict("01-bad-request", passed=False, problem="OUTPUT0 is wrong for row 1.", hint="add row by row.")
UNTOUCHED = RoomVerdict("01-bad-request", passed=False, problem="x", started=False)


def _room(tmp_path, participants=("p01", "p02")):
    room = tmp_path / "room"
    room.mkdir()
    (room / "room.json").write_text(json.dumps({"id": "r1", "participants": list(participants)}))
    return room


def test_grades_csv_lists_every_participant_and_exercise(tmp_path, capsys):
    room = _room(tmp_path)
    table = progress.load(room, ["p01", "p02"])
    table.record("p01", "01_python_backend.ipynb", 100.0, [SOLVED, WRONG])
    progress.save(room, table)
    out = tmp_path / "grades.csv"
    assert cli.main(["room", "grades", "--dir", str(room), "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["participant"] for r in rows] == ["p01", "p02"]
    assert set(rows[0]) - {"participant"} == set(progress.exercise_ids())
    assert (rows[0]["01-output2"], rows[0]["01-bad-request"], rows[0]["14-scale"]) == (
        "passed",
        "not yet",
        "not started",
    )
    assert {v for k, v in rows[1].items() if k != "participant"} == {"not started"}
    # without --csv the same table goes to stdout
    capsys.readouterr()
    assert cli.main(["room", "grades", "--dir", str(room)]) == 0
    assert capsys.readouterr().out == out.read_text()


def test_a_started_cell_that_fails_is_not_yet_and_an_untouched_one_not_started(tmp_path):
    table = progress.Progress(["p01"])
    table.record("p01", "01_python_backend.ipynb", 1.0, [UNTOUCHED])
    mark = table.mark("p01", "01-bad-request")
    assert mark.state == progress.NOT_STARTED and mark.hint  # the exercise's own hint, shown on the board
    table.record("p01", "01_python_backend.ipynb", 2.0, [WRONG])
    assert table.mark("p01", "01-bad-request") == progress.Mark(
        "not yet", WRONG.problem, WRONG.hint, table.mark("p01", "01-bad-request").checked
    )
    # a second mistake replaces the first; a later pass clears problem and hint
    table.record("p01", "01_python_backend.ipynb", 3.0, [replace(WRONG, problem="OUTPUT1 is wrong.")])
    assert table.mark("p01", "01-bad-request").problem == "OUTPUT1 is wrong."
    table.record("p01", "01_python_backend.ipynb", 4.0, [replace(WRONG, passed=True)])
    assert table.mark("p01", "01-bad-request").state == "passed" and not table.mark("p01", "01-bad-request").hint
    assert not table.needs_check("p01", "01_python_backend.ipynb", 4.0)
    assert table.needs_check("p01", "01_python_backend.ipynb", 5.0)
    assert table.needs_check("p01", "02_cpp_backends.ipynb", 4.0)


def test_progress_survives_a_round_trip_and_is_replaced_whole(tmp_path):
    room = _room(tmp_path)
    table = progress.load(room, ["p01"])
    table.record("p02", "01_python_backend.ipynb", 7.5, [SOLVED])  # a participant added later joins the table
    progress.save(room, table)
    again = progress.load(room)
    assert again.table() == table.table() and again.judged == {"p02": {"01_python_backend.ipynb": 7.5}}
    assert sorted(p.name for p in room.iterdir()) == ["progress.json", "room.json"]  # no temporary file left


def test_grades_errors_say_what_to_do(tmp_path, capsys):
    assert cli.main(["room", "grades", "--dir", str(tmp_path / "nowhere")]) == cli.EXIT_LABKIT_ERROR
    room = _room(tmp_path)
    (room / "progress.json").write_text("{not json")
    assert cli.main(["room", "grades", "--dir", str(room)]) == cli.EXIT_LABKIT_ERROR
    (room / "progress.json").unlink()
    assert (
        cli.main(["room", "grades", "--dir", str(room), "--csv", str(tmp_path / "no" / "such" / "x.csv")])
        == cli.EXIT_LABKIT_ERROR
    )
    err = capsys.readouterr().err
    assert err.count("labkit: ") == 3


def test_grades_needs_a_subcommand():
    with pytest.raises(SystemExit) as exc:
        cli.main(["room"])
    assert exc.value.code == cli.EXIT_USAGE


def test_the_board_looks_for_the_volumes_the_hub_mounts(tmp_path):
    settings = RoomSettings(directory=tmp_path / "room")
    assert volume_name(settings.room_id, "p07") == settings.volume("p07")


def test_grades_from_a_board_that_does_not_answer_say_so(tmp_path, capsys):
    from labkit.plumbing.ports import free_ports

    nowhere = f"http://127.0.0.1:{free_ports(1)[0]}"
    with pytest.raises(BoardError) as exc:
        board_table(nowhere, "some-token", timeout_s=5)
    assert exc.value.status_code == 0 and exc.value.url.startswith(nowhere)
    assert cli.main(["room", "grades", "--url", nowhere, "--token", "t"]) == cli.EXIT_LABKIT_ERROR
    assert cli.main(["room", "grades", "--url", nowhere]) == cli.EXIT_LABKIT_ERROR  # no token
    assert capsys.readouterr().err.count("labkit: ") == 2
