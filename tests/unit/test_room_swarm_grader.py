"""The swarm grader's rules, without a swarm: the service's sandbox as docker-py's arguments, and what a run's
task (as the Engine API shows it) means for its verdict. The runs themselves: tests/test_room_swarm.py."""

from __future__ import annotations

import json

import pytest

from labkit.errors import RoomSettingsError
from labkit.room.grader import swarm_runner as swarm_grader
from labkit.room.grader.sandbox import GraderRun, Limits
from labkit.room.protocol import RESULT_MARK


def _task(state: str, desired: str = "running", code: int | None = None, err: str = "") -> swarm_grader.TaskView:
    """A task as `GET /tasks` returns it (only the fields the grader reads)."""
    status = {"State": state, "Message": state, **({"Err": err} if err else {})}
    if code is not None:
        status["ContainerStatus"] = {"ContainerID": "c0ffee", "ExitCode": code}
    return swarm_grader.TaskView.of({"ID": "t1", "NodeID": "n1", "DesiredState": desired, "Status": status})


def test_the_service_carries_the_sandbox_limits_user_and_no_restart():
    run = GraderRun("img:1", ["python3", "-m", "x"], Limits(cpu=1.5, memory="512m", pids=64), {"A": "b"}, {"l": "v"})
    args = run.service_arguments()
    assert args["resources"]["Limits"] == {"NanoCPUs": 1_500_000_000, "MemoryBytes": 512 * 1024**2, "Pids": 64}
    assert args["user"] == "1000" and args["cap_drop"] == ["ALL"] and args["workdir"] == "/tmp"
    assert args["restart_policy"]["Condition"] == "none"
    assert {"A=b", "HOME=/tmp/grader-home"} <= set(args["env"])
    (shm,) = args["mounts"]
    assert (shm["Target"], shm["Type"], shm["TmpfsOptions"]["SizeBytes"]) == ("/dev/shm", "tmpfs", 256 * 1024**2)
    assert args["labels"] == args["container_labels"] == {"l": "v"}
    with pytest.raises(RoomSettingsError) as bad:
        GraderRun("img:1", [], Limits(memory="lots")).service_arguments()
    assert bad.value.setting == "grader_memory"


def test_a_task_that_ended_gives_its_result_line_else_why_not():
    result = {"notebook": "01.ipynb", "results": [], "network": ["eth0", "lo"]}
    logs = f"kernel up\n{RESULT_MARK}{json.dumps(result)}\n"
    assert swarm_grader.ended(_task("complete", "shutdown", 0), logs, "2g") == (result, "")
    assert swarm_grader.ended(_task("failed", code=1), logs, "2g") == (result, "")  # the line counts, not the code
    out, why = swarm_grader.ended(_task("complete", code=0), f'{RESULT_MARK}{{"notebook": ', "2g")
    assert out == {} and "cut short" in why
    out, why = swarm_grader.ended(_task("complete", code=0), "kernel up\n", "2g")
    assert out == {} and "without its result line" in why
    out, why = swarm_grader.ended(_task("failed", code=137), "", "2g")
    assert out == {} and "137" in why and "2g" in why
    out, why = swarm_grader.ended(_task("failed", code=2), "a\nb\nTraceback: boom\n", "2g")
    assert out == {} and "exit code 2" in why and "Traceback: boom" in why


@pytest.mark.parametrize(
    ("state", "desired", "words"),
    [
        ("rejected", "shutdown", "rejected: No such image"),
        ("orphaned", "shutdown", "orphaned"),
        ("shutdown", "shutdown", "task shutdown"),
        ("running", "shutdown", "shutting it down"),  # drained, or its node away: Swarm gave it up
    ],
)
def test_a_task_swarm_gave_up_says_so_by_its_state(state, desired, words):
    task = _task(state, desired, err="No such image: img:1" if state == "rejected" else "")
    assert task.state in swarm_grader.GIVEN_UP or task.desired in swarm_grader.GIVEN_UP
    why = swarm_grader.given_up(task, "w1 (10.0.0.2)")
    assert words in why and "w1 (10.0.0.2)" in why


def test_task_states_fall_in_one_group_each():
    groups = (swarm_grader.STARTING, swarm_grader.ENDED, swarm_grader.GIVEN_UP, {"running"})
    every = set().union(*groups)
    assert sum(len(g) for g in groups) == len(every)  # no state in two groups
    # Docker's task states (Engine API 1.41, TaskState)
    docker_states = "new allocated pending assigned accepted preparing ready starting running complete shutdown "
    docker_states += "failed rejected remove orphaned"
    assert set(docker_states.split()) == every
