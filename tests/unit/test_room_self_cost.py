"""A grader's report of its own CPU, without an engine: the cgroup it finds from /proc as the kernel and Docker
lay it out (v1 with the container's cgroup mounted, v2 with a private cgroup namespace, a process outside any
container), carried through the result and the Judgement to the board's running total, and the swarm bench's
report of it (a real grader's report is compared with its cgroup parent in tests/test_room_board_grader.py)."""

from __future__ import annotations

import json
from pathlib import Path

from labkit.room.bench import RoomBench, report
from labkit.room.board import progress
from labkit.room.cpu_cost import own_cgroup_dir, own_cpu_s
from labkit.room.grader.entry import fit
from labkit.room.grader.runner import judgement_of
from labkit.room.protocol import RoomVerdict, Submission

DOCKER_V1 = "/docker/4f1c"
V1_CGROUP = f"12:pids:{DOCKER_V1}\n4:cpu,cpuacct:{DOCKER_V1}\n1:name=systemd:{DOCKER_V1}\n"
V1_MOUNTS = (
    f"700 690 0:28 {DOCKER_V1} /sys/fs/cgroup/pids ro,nosuid - cgroup cgroup rw,pids\n"
    f"701 690 0:29 {DOCKER_V1} /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
    "702 690 0:30 / /proc rw - proc proc rw\n"
)


def _proc(tmp_path: Path, cgroup: str, mountinfo: str) -> Path:
    (tmp_path / "cgroup").write_text(cgroup)
    (tmp_path / "mountinfo").write_text(mountinfo)
    return tmp_path


def test_a_container_finds_its_own_cgroup_on_v1_and_v2(tmp_path: Path):
    assert own_cgroup_dir(_proc(tmp_path, V1_CGROUP, V1_MOUNTS)) == Path("/sys/fs/cgroup/cpu,cpuacct")
    v2 = _proc(tmp_path, "0::/\n", "800 790 0:31 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n")
    assert own_cgroup_dir(v2) == Path("/sys/fs/cgroup")  # a private cgroup namespace: its root is the container


def test_outside_a_container_the_path_is_followed_below_the_mount(tmp_path: Path):
    host = _proc(
        tmp_path,
        "4:cpuacct,cpu:/user.slice/session-3.scope\n",
        "30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
    )
    assert own_cgroup_dir(host) == Path("/sys/fs/cgroup/cpu,cpuacct/user.slice/session-3.scope")


def test_no_figure_when_proc_does_not_say_or_the_counter_is_unreadable(tmp_path: Path):
    assert own_cgroup_dir(tmp_path / "absent") is None and own_cpu_s(tmp_path / "absent") is None
    no_cpuacct = _proc(tmp_path, "12:pids:/x\n", "1 0 0:1 /x /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n")
    assert own_cgroup_dir(no_cpuacct) is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    mounted = f"1 0 0:1 / {elsewhere} rw - cgroup2 cgroup2 rw\n"
    assert own_cpu_s(_proc(tmp_path, "0::/\n", mounted)) is None  # mounted in /proc's words, but no counter there
    (elsewhere / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n")
    assert own_cpu_s(tmp_path) == 1.5
    assert own_cpu_s(_proc(tmp_path, "0::/\n", mounted.replace(str(elsewhere), str(tmp_path / "gone")))) is None


def test_the_figure_travels_in_the_result_and_the_judgement():
    submission = Submission("p01", "01_python_backend.ipynb", {"01-output2": "x"})
    result = {"results": [RoomVerdict("01-output2", passed=True).to_json()], "cpu_s": 2.75}
    assert judgement_of(submission, result, "", 1.0).cpu_s == 2.75
    assert judgement_of(submission, {**result, "cpu_s": "2"}, "", 1.0).cpu_s is None  # not a number: no figure
    assert judgement_of(submission, {"results": []}, "", 1.0).cpu_s is None
    failed = judgement_of(submission, {"error": "no notebook", "cpu_s": 1.5}, "", 1.0)
    assert failed.error and failed.cpu_s == 1.5  # a run that answered an error still cost its CPU
    assert json.loads(fit({**result, "error": "x" * 9000}, 4096))["cpu_s"] == 2.75  # a Pod's message keeps it


def test_the_board_keeps_a_running_total_in_its_file(tmp_path: Path):
    table = progress.Progress(["p01"])
    for cpu_s in (2.5, None, 1.25):
        table.charge(cpu_s)
    assert table.cost == progress.Cost(cpu_s=3.75, runs=2, unreported=1)
    progress.save(tmp_path, table)
    assert progress.load(tmp_path).cost == table.cost
    progress.progress_file(tmp_path).write_text(json.dumps({"participants": ["p01"]}))  # a file from before
    assert progress.load(tmp_path).cost == progress.Cost()


def test_the_swarm_bench_reports_the_graders_own_figures_and_a_lab_memory_it_could_not_read():
    cpu_s = {"board": 1.2, "graders": 22.8}
    result = RoomBench(participants=6, swarm=True, checks={"01_python_backend.ipynb": [20.0] * 6}, cpu_s=cpu_s)
    result.core_s_per_save, result.graders_reported_s, result.graders_unreported = 4.0, 22.8, 1
    text = report(result)
    assert "6 participant(s) on a swarm" in text and "not read" in text and "MiB" not in text
    assert "graders, as they reported:          22.8 core-s, 1 run(s) without a figure" in text
    data = json.loads(json.dumps(result.to_json()))
    assert data["swarm"] and data["lab_memory_idle"] is None and data["core_s_per_save"] == 4.0
    assert data["graders_reported_s"] == 22.8 and data["checks"]["01_python_backend.ipynb"]["n"] == 6
