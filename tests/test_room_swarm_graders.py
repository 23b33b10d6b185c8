"""The room's graders as Swarm services on the workers (labkit.room.grader.swarm_runner): a save judged on a
worker, the sandbox's network, and a grader whose node is drained judged again."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator

import pytest
from room_board_support import NOTEBOOK, WRONG_BAD_REQUEST, notebook, solution
from swarm_room_support import SwarmRoom, down_within, lab_services, set_availability
from swarm_support import Swarm
from waiting_support import eventually

from labkit.plumbing.ports import free_ports
from labkit.room.grader.swarm_runner import SUBMISSION_PATH, SwarmGrader
from labkit.room.protocol import RESULT_MARK, ROLE_LABEL, ROOM_LABEL, Submission

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


# --- grader ---

# a probe in the grader's sandbox: which of the addresses (host:port, in its config file) it can connect to
PROBE = """
import json, os, socket, sys
reached = []
for target in json.loads(open(sys.argv[1]).read()):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        reached.append(target)
    except OSError:
        pass
print(sys.argv[2] + json.dumps({"reached": reached, "network": sorted(os.listdir("/sys/class/net"))}), flush=True)
"""


def _grader_things(swarm: Swarm, room_id: str) -> list[str]:
    """The room's grader services, configs and networks (the manager's) and containers (every node's) still there."""
    label = {"label": [f"{ROOM_LABEL}={room_id}", f"{ROLE_LABEL}=grader"]}
    manager = swarm.client(swarm.manager)
    left = [f"service {s.name}" for s in manager.services.list(filters=label)]
    left += [f"config {c.name}" for c in manager.configs.list(filters=label)]
    left += [f"network {n.name}" for n in manager.networks.list(filters=label)]
    for node in swarm.nodes:
        left += [
            f"container {c.name} on {node.name}" for c in swarm.client(node).containers.list(all=True, filters=label)
        ]
    return left


def _lab_of(room: SwarmRoom, login: str) -> str:
    """Start ``login``'s lab and wait until it is ready; their token."""
    assert room.request("POST", f"hub/api/users/{login}/server").status_code in (201, 202)
    eventually(
        lambda: room.ready([login]), f"{login}'s lab ready (see {room.directory / 'hub.log'})", 300, interval_s=1
    )
    return room.request("POST", f"hub/api/users/{login}/tokens", json={"expires_in": 1800}).json()["token"]


def _save(room: SwarmRoom, login: str, token: str, cells: dict[str, str]) -> None:
    """``login`` saves notebook 01 with these exercise cells, as JupyterLab does (the contents API, through the
    hub's proxy), and the teacher asks the board to look now (it would within its 20 s scan)."""
    body = {"type": "notebook", "content": notebook(cells)}
    saved = room.request("PUT", f"user/{login}/api/contents/{NOTEBOOK}", token, json=body)
    assert saved.status_code in (200, 201), saved.text
    assert room.request("POST", "services/board/api/refresh").status_code == 200


def _marked(room: SwarmRoom, login: str, exercise: str, state: str) -> None:
    """Until the board's table (its JSON, as the teacher's token reads it) shows ``state``."""

    def shown() -> bool:
        reply = room.request("GET", "services/board/api/progress")
        return reply.status_code == 200 and reply.json()["participants"][login].get(exercise) == state

    eventually(
        shown, f"{login}'s {exercise} {state} on the board (see {room.directory / 'hub.log'})", 600, interval_s=1
    )


def _grader_nodes(room: SwarmRoom) -> list[str]:
    """The address of the node of each grader run, in order, as the board's log names it."""
    log = (room.directory / "hub.log").read_text(errors="replace")
    return re.findall(r"grader of .+? on node .*?\(([\d.]+)\)", log)


def test_swarm_grader_judges_a_save_on_a_worker_and_leaves_nothing_behind(swarm, tmp_path):
    """p01's lab on a worker saves notebook 01 with 01-output2 solved: the board, on the manager, has it judged
    by a grader service on a worker and shows it passed; 01-bad-request saved wrong after it: "not yet", and
    01-output2 stays passed. No grader service, config, network or container is left on any node."""
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port, participants=1)
    room_id = room.record["room_id"]
    try:
        token = _lab_of(room, "p01")
        _save(room, "p01", token, {"01-output2": solution("01-output2")})
        _marked(room, "p01", "01-output2", "passed")
        _save(room, "p01", token, {"01-output2": solution("01-output2"), "01-bad-request": WRONG_BAD_REQUEST})
        _marked(room, "p01", "01-bad-request", "not yet")
        marks = room.request("GET", "services/board/api/progress").json()["participants"]["p01"]
        assert marks["01-output2"] == "passed", marks
        ran_on = _grader_nodes(room)
        assert len(ran_on) == 2 and set(ran_on) <= {w.address for w in swarm.workers}, ran_on
        eventually(lambda: not _grader_things(swarm, room_id), "every grader gone from every node", 60, interval_s=1)
        # each grader read its own container's CPU on its worker; the board added both figures up
        cost = json.loads((room.directory / "progress.json").read_text())["cost"]
        assert (cost["runs"], cost["unreported"]) == (2, 0) and cost["cpu_s"] > 0, cost
    finally:
        room.down()
    assert not _grader_things(swarm, room_id)


def test_swarm_grader_sandbox_reaches_no_other_node_and_a_missing_image_is_judged_again(swarm):
    """What a grader service sees: an eth0 beside lo (Swarm gives no network mode none), through which it reaches
    no other node (not the manager's swarm port, not the other worker's). A grader whose image is missing on the
    worker: Swarm rejects its task at once, and the Judgement says to judge it again."""
    manager, room_id = swarm.client(swarm.manager), f"probe{os.getpid()}"
    grader = SwarmGrader(manager, room_id, swarm.images[1])
    targets = [f"{swarm.manager.address}:2377", *(f"{w.address}:7946" for w in swarm.workers)]
    out, why = grader.run(json.dumps(targets), "a probe", ("python3", "-c", PROBE, SUBMISSION_PATH, RESULT_MARK))
    assert why == "" and out["network"] == ["eth0", "lo"], (out, why)
    assert targets[0] not in out["reached"] and len(out["reached"]) <= 1, out  # at most its own node's port
    # no start margin to spend: were the rejected task waited for, the test would run into its own timeout
    missing = SwarmGrader(manager, room_id, "labkit-test/not-on-any-worker:1", start_s=24 * 3600)
    judged = missing.judge(Submission("p01", NOTEBOOK, {"01-output2": solution("01-output2")}))
    assert judged.retry and judged.error and not any(r.passed for r in judged.results), judged
    eventually(lambda: not _grader_things(swarm, room_id), "the probes' services gone", 60, interval_s=1)


@contextlib.contextmanager
def _judging_on_the_second_worker(swarm: Swarm, tmp_path) -> Iterator[tuple[SwarmRoom, Callable[[], bool]]]:
    """A room of one participant whose lab is on the first worker, paused (it keeps its lab, takes no new task),
    and p01's save being judged on the second: (the room, whether a grader of it runs on the second worker).
    Afterwards the first worker is active again, the save's runs went to the second then the first worker (the
    board's log), no grader is left on any node, and the room is taken down."""
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port, participants=1)
    room_id, (first, second) = room.record["room_id"], swarm.workers
    label = {"label": [f"{ROOM_LABEL}={room_id}", f"{ROLE_LABEL}=grader"]}
    manager = swarm.client(swarm.manager)

    def running_on_second() -> bool:
        tasks = [t for s in manager.services.list(filters=label) for t in s.tasks()]
        return any(t["Status"]["State"] == "running" and t["NodeID"] == swarm.node_ids[second.name] for t in tasks)

    try:
        token = _lab_of(room, "p01")
        (lab,) = lab_services(swarm, room_id)
        assert swarm.node_of(lab.tasks(filters={"desired-state": "running"})[0]["NodeID"]) == first
        set_availability(swarm, first, "pause")
        try:
            _save(room, "p01", token, {"01-output2": solution("01-output2")})
            eventually(running_on_second, "p01's grader running on the second worker", 300, interval_s=0.3)
            yield room, running_on_second
        finally:
            set_availability(swarm, first, "active")
        assert _grader_nodes(room) == [second.address, first.address]
        eventually(lambda: not _grader_things(swarm, room_id), "every grader gone from every node", 120, interval_s=1)
    finally:
        room.down()


def _not_started_then_passed_on_the_first(swarm: Swarm, room: SwarmRoom) -> None:
    """No verdict from the stopped run; once the first worker takes tasks again, the save's next run there passes."""
    marks = room.request("GET", "services/board/api/progress").json()["participants"]["p01"]
    assert marks["01-output2"] == "not started", marks
    set_availability(swarm, swarm.workers[0], "active")
    _marked(room, "p01", "01-output2", "passed")


def test_swarm_grader_drain_a_grader_whose_node_is_drained_is_judged_again(swarm, tmp_path):
    """p01's save is judged on the second worker, which is drained while the grader runs there. Swarm stops that
    grader and starts no other (no restart); the board judges the save again, on the first worker once it is
    active, and shows it passed. Nothing of either grader is left."""
    second = swarm.workers[1]
    with _judging_on_the_second_worker(swarm, tmp_path) as (room, running_on_second):
        set_availability(swarm, second, "drain")
        try:
            eventually(lambda: not running_on_second(), "the drained worker's grader stopped", 120, interval_s=0.5)
            _not_started_then_passed_on_the_first(swarm, room)
        finally:
            set_availability(swarm, second, "active")


def test_swarm_grader_kill_a_grader_whose_nodes_engine_dies_is_judged_again(swarm, tmp_path):
    """As above, but the second worker's engine is killed (a machine losing power) while p01's grader runs there:
    once the manager marks the node down, the run is given up at once (not after its time limit, 600 s) and the
    board judges the save again, on the first worker; the dead node's engine is started again."""
    second = swarm.workers[1]
    with _judging_on_the_second_worker(swarm, tmp_path) as (room, running_on_second):
        swarm.kill_engine(second)
        try:
            swarm.wait_node(second, "down", down_within(swarm))
            eventually(lambda: not running_on_second(), "the dead node's run given up", 60, interval_s=0.5)
            _not_started_then_passed_on_the_first(swarm, room)
        finally:
            swarm.start_engine(second)


# --- bench ---


def test_swarm_bench_reports_labs_ready_verdicts_and_the_cost_of_a_save(swarm, tmp_path):
    """`labkit room bench --swarm` with two participants, on the manager, `--node-engine` for each worker: its
    JSON holds the labs' ready times, the lab's memory read on its worker, both saves' verdicts, and
    core_s_per_save made of the board's CPU and the graders' own reports (none missing); the room is gone after."""
    from swarm_room_support import labkit_cli

    from labkit.room.settings import RoomSettings

    (port,) = free_ports(1)
    out = tmp_path / "bench.json"
    engines = [f"--node-engine={worker.url}" for worker in swarm.workers]
    labkit_cli(
        swarm, "room", "bench", "--swarm", "--participants", "2", "--dir", str(tmp_path / "room"), "--port",
        str(port), "--image", swarm.images[0], "--json", str(out), *engines,
    )  # fmt: skip
    data = json.loads(out.read_text())
    assert data["swarm"] and set(data["ready_s"]) == {"p01", "p02"} and data["all_ready_s"] > 0
    assert data["lab_memory_idle"] > 0 and data["lab_memory_triton"] > 0
    assert data["checks"][NOTEBOOK]["n"] == 2 and data["checks_missing"] == 0 and not data["single_missing"]
    assert set(data["cpu_s"]) == {"board", "graders"} and data["graders_unreported"] == 0
    assert data["cpu_s"]["graders"] == data["graders_reported_s"] > 0
    assert data["core_s_per_save"] == round((data["cpu_s"]["board"] + data["cpu_s"]["graders"]) / 2, 3)
    room_id = RoomSettings(directory=tmp_path / "room").room_id
    assert not swarm.client(swarm.manager).services.list(filters={"label": f"{ROOM_LABEL}={room_id}"})  # taken down
