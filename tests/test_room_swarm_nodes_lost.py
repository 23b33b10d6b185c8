"""The room on Docker Swarm when a worker drains, dies, or never comes back: p01's lab (on the first worker, by
`room up`'s placement) is named with its node by `room status` and the board, never restarted empty elsewhere,
brought back with its work when the node returns, and moved by `room rehome` when it does not."""

from __future__ import annotations

import contextlib
import sys

import docker.errors
import pytest
from swarm_room_support import SwarmRoom, labkit_cli, room_services, set_availability
from swarm_support import Swarm
from waiting_support import eventually

from labkit.errors import SwarmNodeError
from labkit.plumbing.ports import free_ports
from labkit.room.hub.rehome import rehome
from labkit.room.protocol import ROOM_LABEL

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


# --- nodes ---
# A worker drained, its engine killed, a node that never returns: p01's lab (on the first worker, by `room up`'s
# placement) is named with its node by `room status` and the board, never restarted empty elsewhere, brought back
# with its work when the node returns, and moved by `room rehome` when it does not. One room for the three.


@pytest.fixture(scope="module")
def nodes_room(swarm, tmp_path_factory):
    (port,) = free_ports(1)
    started = SwarmRoom(swarm, tmp_path_factory.mktemp("swarm-nodes"), port)
    try:
        yield started
    finally:
        started.down("--delete-work")


def _p01_running(room: SwarmRoom) -> str:
    """p01's lab started (if it is not running) and ready; their token."""
    if not room.ready(["p01"]):
        assert room.request("POST", "hub/api/users/p01/server").status_code in (201, 202, 400)
    eventually(lambda: room.ready(["p01"]), f"p01's lab ready (see {room.directory / 'hub.log'})", 300, interval_s=1)
    return room.request("POST", "hub/api/users/p01/tokens", json={"expires_in": 1800}).json()["token"]


def _p01_tasks(swarm: Swarm, room: SwarmRoom) -> list[dict]:
    """The tasks of p01's lab meant to run, on any node."""
    return [
        task
        for service in room_services(swarm, room.record["room_id"])
        if service.attrs["Spec"]["Labels"].get(f"{ROOM_LABEL}.user") == "p01"  # a grader service has none
        for task in service.tasks(filters={"desired-state": "running"})
    ]


def _p01_node(swarm: Swarm, room: SwarmRoom):
    (task,) = _p01_tasks(swarm, room)
    return swarm.node_of(task["NodeID"])


def _save_text(room: SwarmRoom, token: str, name: str, text: str) -> None:
    body = {"type": "file", "format": "text", "content": text}
    assert room.request("PUT", f"user/p01/api/contents/{name}", token, json=body).status_code in (200, 201)


def _read_text(room: SwarmRoom, token: str, name: str) -> str:
    found = room.request("GET", f"user/p01/api/contents/{name}", token)
    assert found.status_code == 200, found.text
    return found.json()["content"]


def _p01_status(swarm: Swarm, room: SwarmRoom) -> str:
    status = labkit_cli(swarm, "room", "status", "--dir", str(room.directory))
    return next(line for line in status.splitlines() if line.strip().startswith("p01"))


def _board_nodes(room: SwarmRoom) -> dict:
    progress = room.request("GET", "services/board/api/progress")
    assert progress.status_code == 200, progress.text
    return progress.json().get("nodes", {})


def _seen_affected(swarm: Swarm, room: SwarmRoom, node, why: str) -> bool:
    """`room status` and the board's JSON both name p01, on ``node``, ``why`` (drained, down), lab stopped."""
    line = _p01_status(swarm, room)
    if not (line.split()[1] == "stopped" and f"({node.address})" in line and f"node {why}" in line):
        return False
    seen = _board_nodes(room).get("p01", {})
    return seen.get("node_state") == why and seen.get("lab") == "stopped" and f"({node.address})" in seen["node"]


def _nothing_of_p01_runs(swarm: Swarm, room: SwarmRoom) -> None:
    """No task of p01's meant to run, and no container of theirs running on any reachable node."""
    assert _p01_tasks(swarm, room) == []
    for node in swarm.workers:
        with contextlib.suppress(docker.errors.DockerException):
            held = swarm.client(node).containers.list(filters={"label": f"{ROOM_LABEL}.user=p01"})
            assert [c.name for c in held if c.labels.get(ROOM_LABEL) == room.record["room_id"]] == []


def _board_page(room: SwarmRoom) -> str:
    page = room.request("GET", "services/board/")
    assert page.status_code == 200, page.text
    return page.text


def test_swarm_drain_names_p01_and_their_node_runs_nothing_elsewhere_and_brings_the_lab_back(swarm, nodes_room):
    room = nodes_room
    token = _p01_running(room)
    node = _p01_node(swarm, room)
    spec = room_services(swarm, room.record["room_id"])[0].attrs["Spec"]["TaskTemplate"]
    # pinned to the node holding the work, and never restarted by Swarm (elsewhere or there)
    assert f"node.id=={swarm.node_ids[node.name]}" in spec["Placement"]["Constraints"]
    assert spec["RestartPolicy"]["Condition"] == "none"
    _save_text(room, token, "before-drain.txt", "saved before the drain")
    set_availability(swarm, node, "drain")
    try:
        eventually(lambda: _seen_affected(swarm, room, node, "drained"), "status and board: p01, node drained", 120)
        _nothing_of_p01_runs(swarm, room)
        assert f"({node.address}) is drained: p01" in _board_page(room)
    finally:
        set_availability(swarm, node, "active")
    # the board starts the lab again, on the same node, with the same work
    eventually(lambda: room.ready(["p01"]), "p01's lab back once its node is active", 300, interval_s=1)
    assert _p01_node(swarm, room) == node
    assert _read_text(room, _p01_running(room), "before-drain.txt") == "saved before the drain"
    assert "drained" not in _p01_status(swarm, room)


def _down_within(swarm: Swarm) -> float:
    """How long the manager takes to mark a silent node down: its dispatcher's heartbeat period (the swarm's
    spec) times swarmkit's grace multiplier (3), plus room for a busy machine."""
    period_ns = swarm.client(swarm.manager).swarm.attrs["Spec"]["Dispatcher"]["HeartbeatPeriod"]
    return 3 * period_ns / 1e9 + 30


def test_swarm_kill_of_p01s_engine_names_them_node_down_and_their_lab_comes_back_with_the_work(swarm, nodes_room):
    room = nodes_room
    token = _p01_running(room)
    node = _p01_node(swarm, room)
    _save_text(room, token, "before-kill.txt", "saved before the engine died")
    swarm.kill_engine(node)
    try:
        swarm.wait_node(node, "down", _down_within(swarm))
        eventually(lambda: _seen_affected(swarm, room, node, "down"), "status and board: p01, node down", 120)
        _nothing_of_p01_runs(swarm, room)
        assert f"({node.address}) is down: p01" in _board_page(room)
    finally:
        swarm.start_engine(node)
    eventually(lambda: room.ready(["p01"]), "p01's lab back once its engine runs again", 300, interval_s=1)
    assert _p01_node(swarm, room) == node
    assert _read_text(room, _p01_running(room), "before-kill.txt") == "saved before the engine died"


def _edited_notebook(room: SwarmRoom, token: str) -> tuple[str, dict]:
    """A course notebook of p01's with an exercise cell changed and saved (the path, the notebook)."""
    listing = room.request("GET", "user/p01/api/contents/", token).json()["content"]
    name = sorted(item["path"] for item in listing if item["type"] == "notebook")[0]
    notebook = room.request("GET", f"user/p01/api/contents/{name}", token).json()["content"]
    cell = next(c for c in notebook["cells"] if any(t.startswith("exercise:") for t in c["metadata"].get("tags", [])))
    cell["source"] = "# p01's answer, saved before their node went for good\n"
    body = {"type": "notebook", "format": "json", "content": notebook}
    assert room.request("PUT", f"user/p01/api/contents/{name}", token, json=body).status_code in (200, 201)
    return name, notebook


def _rehome(swarm: Swarm, room: SwarmRoom, *args: str):
    return swarm.run_in(
        swarm.manager,
        [sys.executable, "-m", "labkit.cli", "room", "rehome", "--dir", str(room.directory), *args],
        timeout=600,
    )


def test_swarm_rehome_p01_from_a_node_that_stays_down_restores_the_notebook_the_board_saw(
    swarm, nodes_room, monkeypatch
):
    room = nodes_room
    token = _p01_running(room)
    node = _p01_node(swarm, room)
    other = next(w for w in swarm.workers if w != node)
    name, notebook = _edited_notebook(room, token)
    kept = room.directory / "saved" / "p01" / name

    def board_kept() -> bool:
        room.request("POST", "services/board/api/refresh")
        return kept.exists() and "saved before their node went" in kept.read_text()

    eventually(board_kept, "the board's copy of p01's saved notebook", 120, interval_s=2)
    monkeypatch.setenv("DOCKER_HOST", swarm.manager.url)  # as on the manager: its engine, its addresses
    for name_given, problem in ((other.address, "still up"), ("no-such-node", "unknown")):
        with pytest.raises(SwarmNodeError) as refused:
            swarm.call_in(swarm.manager, lambda: rehome(room.directory, name_given))  # noqa: B023 - called at once
        assert (refused.value.problem, refused.value.node) == (problem, name_given)
    assert _p01_node(swarm, room) == node  # nothing moved
    swarm.kill_engine(node)
    try:
        swarm.wait_node(node, "down", _down_within(swarm))
        eventually(lambda: _seen_affected(swarm, room, node, "down"), "status and board: p01, node down", 120)
        moved = _rehome(swarm, room, "--from", node.address)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert f"p01: restored {name}" in moved.stdout, moved.stdout
        assert _p01_node(swarm, room) == other
        restored = room.request("GET", f"user/p01/api/contents/{name}", _p01_running(room)).json()["content"]
        assert [c["source"] for c in restored["cells"]] == [c["source"] for c in notebook["cells"]]
        line = _p01_status(swarm, room)
        assert line.split()[1] == "running" and f"({other.address})" in line and "node down" not in line, line
    finally:
        swarm.start_engine(node)
    # the node back: p01 stays where they were moved (their lab is not started on the old node again)
    eventually(lambda: room.ready(["p01"]) and _p01_node(swarm, room) == other, "p01 still on the other worker", 60)
