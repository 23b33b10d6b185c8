"""`labkit room bench`: its arguments and its report (the bench itself drives a real room: run by hand,
see docs/workshop.md; no timed assertions anywhere)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from labkit.room import commands as room_cli
from labkit.room.bench import RoomBench, report
from labkit.room.cpu_cost import per_save


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="labkit")
    room_cli.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_bench_takes_room_ups_options_and_keeps_off_a_real_rooms_folder_and_port():
    args = _parse(["room", "bench", "--participants", "2", "--memory", "3G", "--json", "b.json"])
    settings = room_cli.settings_from(args)
    assert settings.participants == ("p01", "p02") and settings.memory == "3G"
    assert settings.directory == Path("room-bench") and settings.port == 8099 and args.json == "b.json"
    up = room_cli.settings_from(_parse(["room", "up", "--participants", "2", "--memory", "3G"]))
    assert up == settings.with_(directory=Path("room"), port=8080)  # otherwise the very settings of `room up`
    assert args.func.__name__ == "_bench"


def test_bench_refuses_a_participant_count_that_is_not_a_number():
    with pytest.raises(SystemExit) as info:
        _parse(["room", "bench", "--participants", "two"])
    assert info.value.code == 2


def test_the_report_gives_percentiles_per_check_and_says_what_is_missing():
    result = RoomBench(
        participants=3,
        up_s=12.0,
        all_ready_s=9.5,
        ready_s={"p01": 5.0, "p02": 7.0, "p03": 9.5},
        lab_memory_idle=150 * 2**20,
        lab_memory_triton=400 * 2**20,
        triton_start_s=2.5,
        checks={"01_python_backend.ipynb": [10.0, 20.0, 30.0]},
        checks_missing=1,
    )
    text = report(result)
    assert "150 MiB" in text and "400 MiB" in text
    assert "check 01_python_backend.ipynb: save -> verdict 20.0 s / 29.0 s (n=3)" in text
    assert "1 saved notebook(s) had no verdict" in text
    summary = result.to_json()["checks"]["01_python_backend.ipynb"]
    assert summary == {"n": 3, "p50_s": 20.0, "p95_s": 29.0, "max_s": 30.0}
    assert "no verdict" not in report(RoomBench(participants=1))  # nothing measured: dashes, no error
    assert "one save alone: save -> verdict      4.5 s" in report(RoomBench(participants=1, single_s=4.5))
    assert "one save alone: no verdict" in report(RoomBench(participants=1, single_missing=True))


def test_bench_takes_the_notebook_to_save():
    assert _parse(["room", "bench"]).notebook == "01_python_backend.ipynb"
    assert _parse(["room", "bench", "--notebook", "17_real_models.ipynb"]).notebook == "17_real_models.ipynb"


def test_the_cost_of_a_save_is_in_the_report_and_the_json():
    cpu_s = {"graders": 8.4, "board": 0.6}
    result = RoomBench(participants=6, checks={"01_python_backend.ipynb": [9.0] * 6}, cpu_s=cpu_s)
    result.core_s_per_save = per_save(cpu_s, 6)
    assert result.core_s_per_save == 1.5
    data = json.loads(json.dumps(result.to_json()))
    assert data["core_s_per_save"] == 1.5 and data["cpu_s"] == cpu_s and data["notebook"] == "01_python_backend.ipynb"
    assert "core_s_per_save:                    1.50 core-s (board 0.6, graders 8.4 in all)" in report(result)
    assert RoomBench(participants=1).to_json()["core_s_per_save"] is None  # no verdict, no figure
    assert per_save({"graders": 3.0}, 0) is None
    assert "core_s_per_save" not in report(RoomBench(participants=1))
    assert "one save alone, CPU:                1.25 core-s" in report(RoomBench(participants=1, single_core_s=1.25))
