"""labkit.room.cpu_cost's naming and reading of cgroups, on folders laid out as the kernel lays them out (a
real container's CPU is measured in tests/test_room_cpu_cost.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labkit.errors import SetupError
from labkit.room import cpu_cost


def test_a_rooms_cgroup_parent_follows_the_engines_driver():
    assert cpu_cost.room_cgroup("3fa2c9d1") == "/labkit-room-3fa2c9d1"
    assert cpu_cost.room_cgroup("3fa2c9d1", "systemd") == "labkit-room-3fa2c9d1.slice"
    assert cpu_cost.room_cgroup("3fa2c9d1", "none") == ""  # rootless Docker: the engine's default


def test_where_its_cpu_time_is_read(tmp_path: Path):
    assert cpu_cost.cgroup_dir("/labkit-room-a1", "1", tmp_path) == tmp_path / "cpuacct" / "labkit-room-a1"
    assert cpu_cost.cgroup_dir("/labkit-room-a1", "2", tmp_path) == tmp_path / "labkit-room-a1"
    nested = "labkit.slice/labkit-room.slice/labkit-room-a1.slice"  # systemd's reading of the dashes
    assert cpu_cost.cgroup_dir("labkit-room-a1.slice", "2", tmp_path) == tmp_path / nested


def test_v1_and_v2_counters_and_a_process(tmp_path: Path):
    (tmp_path / "cpuacct.usage").write_text("2500000000\n")  # v1: nanoseconds
    assert cpu_cost.cgroup_cpu_s(tmp_path) == 2.5
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.stat").write_text("usage_usec 1250000\nuser_usec 1000000\nsystem_usec 250000\n")
    assert cpu_cost.cgroup_cpu_s(v2) == 1.25
    with pytest.raises(SetupError) as info:
        cpu_cost.cgroup_cpu_s(tmp_path / "gone")
    assert info.value.missing == str(tmp_path / "gone")
    sum(range(3_000_000))  # some CPU of this process, so that its figure is above nothing
    assert cpu_cost.process_cpu_s(os.getpid()) > 0
    meter = cpu_cost.CpuMeter(cgroups={"graders": tmp_path}, pids={"board": os.getpid()})
    before = meter.sample()
    (tmp_path / "cpuacct.usage").write_text("4000000000\n")
    cost = meter.since(before)
    assert cost["graders"] == 1.5 and cost["board"] >= 0
    assert cpu_cost.per_save({"graders": 3.0, "board": 0.0}, 2) == 1.5


def test_removing_a_rooms_cgroup_leaves_one_in_use_and_others_alone(tmp_path: Path):
    for hierarchy in ("cpuacct", "memory"):
        (tmp_path / hierarchy / "labkit-room-a1").mkdir(parents=True)
    (tmp_path / "cpuacct" / "labkit-room-a1" / "container").mkdir()  # still in use: not removed
    (tmp_path / "cpuacct" / "other").mkdir()
    cpu_cost.remove_cgroup("/labkit-room-a1", tmp_path)
    assert not (tmp_path / "memory" / "labkit-room-a1").exists()
    assert (tmp_path / "cpuacct" / "labkit-room-a1" / "container").is_dir() and (
        tmp_path / "cpuacct" / "other"
    ).is_dir()
    cpu_cost.remove_cgroup("labkit-room-a1.slice", tmp_path)  # systemd's: left to systemd
    cpu_cost.remove_cgroup("/", tmp_path)  # never the root
    assert (tmp_path / "cpuacct").is_dir()
