"""The room on Docker Swarm (`labkit room up --swarm`), on a real three-engine swarm that tests/swarm_support.py
builds in network namespaces: labs spread over the two workers and reached through the hub's proxy on the
manager, each participant's node in `room status`, and `room down` leaving nothing on any node.
Selected with `pytest -k swarm`. Needs root (namespaces, engines): skipped without, failed in CI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path

import docker.errors
import pytest
import requests
from ci_rules import skip_or_fail
from room_board_support import NOTEBOOK, WRONG_BAD_REQUEST, notebook, solution
from swarm_support import Swarm, leftovers, missing_tools
from waiting_support import eventually

from labkit.errors import SetupError, SwarmNodeError
from labkit.plumbing.ports import free_ports
from labkit.room.grader.swarm_runner import SUBMISSION_PATH, SwarmGrader
from labkit.room.hub import lifecycle, process as hub_process
from labkit.room.hub.rehome import rehome
from labkit.room.protocol import RESULT_MARK, ROLE_LABEL, ROOM_LABEL, WORK_LABEL, Submission
from labkit.room.settings import RoomSettings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
LOGINS = ("p01", "p02")


@pytest.fixture(scope="module")
def swarm(lab_image, grader_image, engine):
    """A manager and two workers, the lab and grader images loaded into both workers; all gone after the module."""
    if os.geteuid() != 0 or missing_tools():
        skip_or_fail(f"a swarm in namespaces needs root and {missing_tools() or 'ip, dockerd'}")
    with Swarm.create() as built:
        built.load_image(lab_image, built.workers, engine)
        built.load_image(grader_image, built.workers, engine)
        yield built
        swarm_id = built.id
    assert leftovers(swarm_id) == []


def _labkit(swarm: Swarm, *args: str, check: bool = True) -> str:
    """`labkit ...` run on the manager (in its namespace, its engine as DOCKER_HOST), as a teacher would."""
    done = swarm.run_in(swarm.manager, [sys.executable, "-m", "labkit.cli", *args], timeout=600)
    assert not check or done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class SwarmRoom:
    """A room that `room up --swarm` started on the manager, and HTTP to it from inside the manager's namespace."""

    def __init__(self, swarm: Swarm, directory: Path, port: int, participants: int = 2, image: str = "") -> None:
        self.swarm, self.directory = swarm, directory
        up = [
            "room",
            "up",
            "--swarm",
            "--dir",
            str(directory),
            "--port",
            str(port),
            "--participants",
            str(participants),
        ]
        _labkit(swarm, *up, "--image", image or swarm.images[0])  # by default the lab image the workers hold
        self.record = json.loads((directory / "room.json").read_text())
        self.url = self.record["url"].rstrip("/")

    def request(self, method: str, path: str, token: str | None = None, **kw) -> requests.Response:
        headers = {"Authorization": f"token {token or self.record['teacher_token']}"}
        url = path if path.startswith("http") else f"{self.url}/{path}"
        return self.swarm.call_in(
            self.swarm.manager,
            lambda: requests.request(method, url, headers=headers, timeout=60, allow_redirects=False, **kw),
        )

    def ready(self, logins) -> bool:
        users = {u["name"]: u for u in self.request("GET", "hub/api/users").json()}
        return all((users[name].get("servers") or {}).get("", {}).get("ready") for name in logins)

    def down(self, *flags: str) -> str:
        return _labkit(self.swarm, "room", "down", "--dir", str(self.directory), *flags)


@pytest.fixture(scope="module")
def room(swarm, tmp_path_factory):
    (port,) = free_ports(1)  # in the manager's namespace nothing else listens: any free number will do
    started = SwarmRoom(swarm, tmp_path_factory.mktemp("swarm-room"), port)
    try:
        yield started
    finally:
        started.down("--delete-work")


def _services(swarm: Swarm, room_id: str) -> list:
    return swarm.client(swarm.manager).services.list(filters={"label": f"{ROOM_LABEL}={room_id}"})


def test_swarm_spread_labs_over_two_workers_each_reached_through_the_proxy(room, swarm):
    for login in LOGINS:
        assert room.request("POST", f"hub/api/users/{login}/server").status_code in (201, 202)
    eventually(lambda: room.ready(LOGINS), f"labs {LOGINS} ready (see {room.directory / 'hub.log'})", 300, interval_s=1)
    services = {s.attrs["Spec"]["Labels"][f"{ROOM_LABEL}.user"]: s for s in _services(swarm, room.record["room_id"])}
    assert sorted(services) == list(LOGINS)
    nodes = {}
    for login, service in services.items():
        spec = service.attrs["Spec"]
        assert spec["EndpointSpec"]["Mode"] == "dnsrr"
        assert "node.role==worker" in spec["TaskTemplate"]["Placement"]["Constraints"]
        (task,) = service.tasks(filters={"desired-state": "running"})
        nodes[login] = swarm.node_of(task["NodeID"])
        # the work volume is on that node, labelled as the room's work (room down keeps it)
        volume = swarm.client(nodes[login]).volumes.get(f"labkit-room-{room.record['room_id']}-{login}")
        assert volume.attrs["Labels"][WORK_LABEL] == room.record["room_id"]
    assert {n.name for n in nodes.values()} == {w.name for w in swarm.workers}, nodes
    # each lab answers through the hub's proxy on the manager, with its participant's token; the notebooks are there
    for login in LOGINS:
        token = room.request("POST", f"hub/api/users/{login}/tokens", json={"expires_in": 600}).json()["token"]
        listing = room.request("GET", f"user/{login}/api/contents/", token)
        assert listing.status_code == 200, listing.text
        assert any(item["name"].endswith(".ipynb") for item in listing.json()["content"])
        saved = room.request(
            "PUT",
            f"user/{login}/api/contents/mine.txt",
            token,
            json={"type": "file", "format": "text", "content": login},
        )
        assert saved.status_code in (200, 201)
    # the teacher sees who runs where
    status = _labkit(swarm, "room", "status", "--dir", str(room.directory))
    for login, node in nodes.items():
        line = next(line for line in status.splitlines() if line.strip().startswith(login))
        assert "running" in line and f"({node.address})" in line, status


def test_swarm_up_on_a_worker_or_off_any_swarm_is_refused_before_anything_starts(swarm, tmp_path, monkeypatch, engine):
    """`room up --swarm` against a worker's engine, or the default engine (in no swarm): a SetupError saying
    it needs the manager, and no room.json, hub or service."""
    (port,) = free_ports(1)
    for url in (swarm.workers[0].url, None):
        if url:
            monkeypatch.setenv("DOCKER_HOST", url)
        else:
            monkeypatch.delenv("DOCKER_HOST", raising=False)
        if url is None and (engine.info().get("Swarm") or {}).get("ControlAvailable"):
            continue  # the default engine manages a swarm of its own: not this check's case
        settings = RoomSettings(directory=tmp_path / "room", port=port, swarm=True, participants=LOGINS)
        with pytest.raises(SetupError) as refused:
            lifecycle.up(settings)
        assert refused.value.reason == "not a manager" and refused.value.missing == "Docker swarm manager"
        assert not (tmp_path / "room" / "room.json").exists()
        assert hub_process.hub_pid(tmp_path / "room") is None


def test_swarm_clean_room_down_leaves_nothing_on_any_node(swarm, tmp_path):
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port)
    room_id = room.record["room_id"]
    for login in LOGINS:
        assert room.request("POST", f"hub/api/users/{login}/server").status_code in (201, 202)
    eventually(lambda: room.ready(LOGINS), "labs ready", 300, interval_s=1)
    held = {
        n.name for n in swarm.workers if swarm.client(n).containers.list(filters={"label": f"{ROOM_LABEL}={room_id}"})
    }
    assert held == {w.name for w in swarm.workers}
    said = room.down()
    assert all(f"service labkit-{room_id}-{login}" in said for login in LOGINS), said

    def nothing_left() -> bool:
        for node in swarm.nodes:
            client = swarm.client(node)
            label = {"label": f"{ROOM_LABEL}={room_id}"}
            if client.containers.list(all=True, filters=label) or client.networks.list(filters=label):
                return False
        manager = swarm.client(swarm.manager)
        return not manager.services.list(filters=label) and not manager.configs.list(filters=label)

    eventually(nothing_left, "the room's services, containers and networks gone from every node", 60, interval_s=1)
    # the work stays on its node (room down keeps it without --delete-work), and no hub runs
    kept = [
        v.name
        for n in swarm.workers
        for v in swarm.client(n).volumes.list(filters={"label": f"{WORK_LABEL}={room_id}"})
    ]
    assert sorted(kept) == [f"labkit-room-{room_id}-{login}" for login in LOGINS]
    with pytest.raises(requests.ConnectionError):
        room.request("GET", "hub/api/")
    for node in swarm.workers:  # the test's own clean-up of the work it kept
        for volume in swarm.client(node).volumes.list(filters={"label": f"{WORK_LABEL}={room_id}"}):
            volume.remove()


def _availability(swarm: Swarm, node, availability: str) -> None:
    found = swarm.client(swarm.manager).nodes.get(swarm.node_ids[node.name])
    found.update({**found.attrs["Spec"], "Availability": availability})


def test_swarm_cancel_a_spawn_cancelled_leaves_no_service_and_the_lab_starts_on_its_node_later(swarm, tmp_path):
    """p02's node (the second worker) drained: their spawn waits; the teacher cancels it (DELETE on the
    pending server). No service is left; once the node is back, p02's lab starts there, not elsewhere."""
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port)
    room_id, second = room.record["room_id"], swarm.workers[1]
    _availability(swarm, second, "drain")
    try:
        assert room.request("POST", "hub/api/users/p02/server").status_code == 202

        def waiting() -> bool:
            services = _services(swarm, room_id)
            return bool(services) and all(t["Status"]["State"] == "pending" for s in services for t in s.tasks())

        eventually(waiting, "p02's service waiting for its drained node", 60, interval_s=0.5)
        assert room.request("DELETE", "hub/api/users/p02/server").status_code in (202, 204)
        eventually(lambda: not _services(swarm, room_id), "the cancelled spawn's service removed", 60, interval_s=0.5)
        status = _labkit(swarm, "room", "status", "--dir", str(room.directory))
        assert next(line for line in status.splitlines() if line.strip().startswith("p02")).split()[1] == "stopped"
    finally:
        _availability(swarm, second, "active")
    assert room.request("POST", "hub/api/users/p02/server").status_code in (201, 202)
    eventually(lambda: room.ready(["p02"]), "p02's lab ready once its node is back", 300, interval_s=1)
    (service,) = _services(swarm, room_id)
    (task,) = service.tasks(filters={"desired-state": "running"})
    assert swarm.node_of(task["NodeID"]) == second
    room.down()
    assert not _services(swarm, room_id)


def test_swarm_image_missing_on_the_workers_fails_the_spawn_at_once_and_leaves_no_service(swarm, tmp_path):
    """A room started on an image the workers do not hold: Swarm rejects the task (nothing is pulled), the
    participant's spawn fails well before its timeout instead of waiting for it, and no service stays."""
    (port,) = free_ports(1)
    directory = tmp_path / "room"
    room = SwarmRoom(swarm, directory, port, participants=1, image="labkit-test/not-on-any-worker:1")
    try:
        started = room.request("POST", "hub/api/users/p01/server")

        def failed() -> bool:
            server = (room.request("GET", "hub/api/users/p01").json().get("servers") or {}).get("")
            return not server and not _services(swarm, room.record["room_id"])

        assert started.status_code in (202, 500)
        # well inside the spawn's own timeout (600 s): the rejected task is not waited for
        eventually(failed, "p01's failed spawn over and its service removed", 120, interval_s=1)
        status = _labkit(swarm, "room", "status", "--dir", str(directory))
        assert next(line for line in status.splitlines() if line.strip().startswith("p01")).split()[1] == "stopped"
    finally:
        room.down()


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
        for service in _services(swarm, room.record["room_id"])
        if service.attrs["Spec"]["Labels"][f"{ROOM_LABEL}.user"] == "p01"
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
    status = _labkit(swarm, "room", "status", "--dir", str(room.directory))
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
    spec = _services(swarm, room.record["room_id"])[0].attrs["Spec"]["TaskTemplate"]
    # pinned to the node holding the work, and never restarted by Swarm (elsewhere or there)
    assert f"node.id=={swarm.node_ids[node.name]}" in spec["Placement"]["Constraints"]
    assert spec["RestartPolicy"]["Condition"] == "none"
    _save_text(room, token, "before-drain.txt", "saved before the drain")
    _availability(swarm, node, "drain")
    try:
        eventually(lambda: _seen_affected(swarm, room, node, "drained"), "status and board: p01, node drained", 120)
        _nothing_of_p01_runs(swarm, room)
        assert f"({node.address}) is drained: p01" in _board_page(room)
    finally:
        _availability(swarm, node, "active")
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


def test_swarm_grader_drain_a_grader_whose_node_is_drained_is_judged_again(swarm, tmp_path):
    """p01's lab is on the first worker, paused (it keeps its lab, takes no new task): p01's save is judged on
    the second worker, which is drained while the grader runs there. Swarm stops that grader and starts no
    other (no restart); the board judges the save again, on the first worker once it is active, and shows it
    passed. Nothing of either grader is left."""
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port, participants=1)
    room_id, (first, second) = room.record["room_id"], swarm.workers
    label = {"label": [f"{ROOM_LABEL}={room_id}", f"{ROLE_LABEL}=grader"]}
    manager = swarm.client(swarm.manager)
    try:
        token = _lab_of(room, "p01")
        (lab,) = _services(swarm, room_id)
        assert swarm.node_of(lab.tasks(filters={"desired-state": "running"})[0]["NodeID"]) == first
        _availability(swarm, first, "pause")
        try:
            _save(room, "p01", token, {"01-output2": solution("01-output2")})

            def running_on_second() -> list:
                tasks = [t for s in manager.services.list(filters=label) for t in s.tasks()]
                return [
                    t for t in tasks if t["Status"]["State"] == "running" and t["NodeID"] == swarm.node_ids[second.name]
                ]

            eventually(running_on_second, "p01's grader running on the second worker", 300, interval_s=0.3)
            _availability(swarm, second, "drain")
            eventually(lambda: not running_on_second(), "the drained worker's grader stopped", 120, interval_s=0.5)
            marks = room.request("GET", "services/board/api/progress").json()["participants"]["p01"]
            assert marks["01-output2"] == "not started", marks  # no verdict from the stopped run
            _availability(swarm, first, "active")  # the second stays drained: the save's next grader goes here
            _marked(room, "p01", "01-output2", "passed")
        finally:
            _availability(swarm, first, "active")
            _availability(swarm, second, "active")
        assert _grader_nodes(room) == [second.address, first.address]
        eventually(lambda: not _grader_things(swarm, room_id), "every grader gone from every node", 60, interval_s=1)
    finally:
        room.down()
