"""A room on a swarm, its nodes as the teacher sees them (labkit issue 51): the one function that says which node
holds each participant and what state it is in (`room status`, the board), the lines naming who a node holds,
`room rehome`'s choice of nodes and its refusals, the board's copies of saved notebooks, and the spawner's state
that keeps a lab's node and why it ended. The swarm itself: tests/test_room_swarm.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_room_hubconfig import PLUMBING, _load

from labkit.errors import RoomFileError, SwarmNodeError
from labkit.room.board import copies
from labkit.room.hub.hubconfig import SWARM_BOARD_SCOPES, render_config
from labkit.room.hub.rehome import find_node, pick
from labkit.room.hub.swarm_nodes import LabPlace, node_state, notes, places
from labkit.room.hub.swarmspawner import RoomSwarmSpawner
from labkit.room.hubclient import lab_state
from labkit.room.settings import BOARD_SCOPES, RoomSettings


def _node(i: int, state: str = "ready", availability: str = "active", role: str = "worker", host: str = "host"):
    return {
        "ID": f"node{i}abcdef",
        "Status": {"State": state, "Addr": f"10.0.0.{i}"},
        "Spec": {"Availability": availability, "Role": role},
        "Description": {"Hostname": host},
    }


def _user(name: str, server: dict | None) -> dict:
    return {"name": name, "servers": {"": server} if server is not None else {}}


def test_a_nodes_state_in_the_teachers_words():
    assert node_state(_node(1)) == "ready"
    assert node_state(_node(1, availability="drain")) == "drained"
    assert node_state(_node(1, availability="pause")) == "paused"
    assert node_state(_node(1, state="down", availability="drain")) == "down"  # dead first: draining won't help
    assert node_state(_node(1, state="unknown")) == "down"
    assert node_state(None) == "gone"


def test_a_labs_state_from_the_hubs_server_model():
    assert lab_state(None) == lab_state({}) == lab_state({"stopped": True, "ready": False}) == "stopped"
    assert lab_state({"ready": True}) == "running"
    assert lab_state({"ready": False, "pending": "spawn"}) == "starting"
    assert lab_state({"ready": True, "pending": "stop"}) == "running"
    assert lab_state({"ready": False, "pending": "stop"}) == "stopping"


def test_places_read_each_participants_node_from_the_spawners_state_else_from_a_starting_labs_task():
    nodes = [_node(1, state="down"), _node(2, availability="drain"), _node(3)]
    users = [
        _user("p01", {"stopped": True, "state": {"node_id": "node1abcdef", "lost_with_node": "down"}}),
        _user("p02", {"ready": True, "state": {"node_id": "node2abcdef"}}),
        _user("p03", {"ready": False, "pending": "spawn", "state": {}}),
        _user("p04", None),  # never started, no task: no node yet
        _user("p05", {"stopped": True, "state": {"node_id": "nodeXgone"}}),
    ]
    found = places(users, nodes, {"p03": "node3abcdef"})
    assert sorted(found) == ["p01", "p02", "p03", "p05"]
    p01, p02, p03, p05 = found["p01"], found["p02"], found["p03"], found["p05"]
    assert (p01.node, p01.node_state, p01.lab, p01.lost) == ("host (10.0.0.1)", "down", "stopped", "down")
    assert p01.affected and not p01.to_restart
    assert (p02.node_state, p02.lab, p02.affected) == ("drained", "running", True)
    assert (p03.node_id, p03.node_state, p03.affected) == ("node3abcdef", "ready", False)
    assert (p05.node, p05.node_state) == ("nodeXgone", "gone")  # a node the swarm forgot: named by its id
    back = replace(p01, node_state="ready")
    assert back.to_restart and not back.affected and back.why()
    assert not replace(back, lab="starting").to_restart and not replace(back, lost="").to_restart
    assert p03.why() == "" and p01.why() and p02.why()


def test_notes_name_who_each_node_holds_and_what_the_teacher_can_do():
    down = LabPlace("p01", "n1", "host (10.0.0.1)", "down", "stopped", "down")
    drained = LabPlace("p02", "n2", "host (10.0.0.2)", "drained", "stopped", "drained")
    fine = LabPlace("p03", "n3", "host (10.0.0.3)", "ready", "running")
    lines = notes({"p01": down, "p04": replace(down, login="p04"), "p02": drained, "p03": fine})
    assert len(lines) == 2
    (on_down,) = [line for line in lines if "10.0.0.1" in line]
    (on_drained,) = [line for line in lines if "10.0.0.2" in line]
    assert "p01, p04" in on_down and "rehome --from 10.0.0.1" in on_down
    assert "p02" in on_drained and "availability active n2" in on_drained and "rehome" not in on_drained
    assert notes({"p03": fine}) == []


def test_find_node_by_address_id_or_name_and_refuses_unknown_and_ambiguous_names():
    nodes = [_node(1), _node(2), _node(3, host="other")]
    assert find_node(nodes, "10.0.0.2")["ID"] == "node2abcdef"
    assert find_node(nodes, "node1abcdef")["ID"] == find_node(nodes, "node1a")["ID"] == "node1abcdef"
    assert find_node(nodes, "other")["ID"] == find_node(nodes, "other (10.0.0.3)")["ID"] == "node3abcdef"
    with pytest.raises(SwarmNodeError) as unknown:
        find_node(nodes, "10.9.9.9")
    assert unknown.value.problem == "unknown" and "host (10.0.0.1)" in unknown.value.known
    with pytest.raises(SwarmNodeError) as ambiguous:
        find_node(nodes, "host")
    assert ambiguous.value.problem == "names several nodes" and len(ambiguous.value.known) == 2
    with pytest.raises(SwarmNodeError):
        find_node(nodes, "node")  # too short a start of an id to name one


def test_pick_moves_to_the_least_loaded_usable_worker_and_refuses_what_cannot_be():
    manager = _node(9, role="manager")
    nodes = [manager, _node(1, state="down"), _node(2), _node(3)]
    load = {f"p{i}": LabPlace(f"p{i}", "node2abcdef", "", "ready", "running") for i in range(2)}
    gone, chosen = pick(nodes, "10.0.0.1", "", load)
    assert (gone["ID"], chosen["ID"]) == ("node1abcdef", "node3abcdef")  # w3 holds no lab, w2 two
    assert pick(nodes, "10.0.0.1", "10.0.0.2", load)[1]["ID"] == "node2abcdef"
    for source, target, problem in (
        ("10.0.0.2", "", "still up"),
        ("10.0.0.1", "10.0.0.9", "not a usable worker"),  # the manager takes no labs
        ("10.0.0.1", "10.0.0.1", "not a usable worker"),
        ("10.0.0.7", "", "unknown"),
    ):
        with pytest.raises(SwarmNodeError) as refused:
            pick(nodes, source, target, load)
        assert refused.value.problem == problem, (source, target)
    drained_up = [manager, _node(1, availability="drain"), _node(2)]
    with pytest.raises(SwarmNodeError) as up:
        pick(drained_up, "10.0.0.1", "", {})
    assert up.value.problem == "still up"  # drained but running: its labs come back with `availability active`
    alone = [manager, _node(1, state="down"), _node(2, availability="drain")]
    with pytest.raises(SwarmNodeError) as none:
        pick(alone, "10.0.0.1", "", {})
    assert none.value.problem == "no other worker"


def test_the_boards_copies_are_whole_files_with_the_saves_mtime_and_never_replace_a_newer_one(tmp_path: Path):
    target = copies.keep(tmp_path, "p01", "sub/01_x.ipynb", b'{"cells": []}', 1000.0)
    assert target == tmp_path / "saved" / "p01" / "sub" / "01_x.ipynb"
    assert target.read_bytes() == b'{"cells": []}' and target.stat().st_mtime == 1000.0
    copies.keep(tmp_path, "p01", "sub/01_x.ipynb", b"older", 900.0)  # a read that raced a newer save
    assert target.read_bytes() == b'{"cells": []}'
    copies.keep(tmp_path, "p01", "sub/01_x.ipynb", b"newer", 1100.0)
    assert target.read_bytes() == b"newer" and target.stat().st_mtime == 1100.0
    assert copies.kept(tmp_path, "p01") == {"sub/01_x.ipynb": target}
    assert copies.kept(tmp_path, "p02") == {}
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temporary file left
    for user, notebook in (("p01", "../p02/01_x.ipynb"), ("p01", "/etc/01_x.ipynb"), ("..", "01_x.ipynb")):
        with pytest.raises(RoomFileError) as refused:
            copies.keep(tmp_path, user, notebook, b"{}", 1.0)
        assert refused.value.problem == "copy unwritable"


def test_a_copy_the_room_folder_cannot_take_is_a_room_file_error(tmp_path: Path):
    (tmp_path / "saved").write_text("a file where the folder goes")
    with pytest.raises(RoomFileError) as refused:
        copies.keep(tmp_path, "p01", "01_x.ipynb", b"{}", 1.0)
    assert refused.value.problem == "copy unwritable" and refused.value.detail


def test_the_swarm_boards_token_reads_spawner_state_and_starts_labs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = RoomSettings(participants=("p01",), directory=tmp_path / "room", swarm=True)
    c = _load(render_config(settings, PLUMBING), monkeypatch)
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "board"]
    assert set(role["scopes"]) == {*BOARD_SCOPES, *SWARM_BOARD_SCOPES}
    assert {"admin:server_state", "servers"} <= set(SWARM_BOARD_SCOPES)
    board = next(s for s in c.JupyterHub.services if s["name"] == "board")
    assert "--swarm" in board["command"]
    one = _load(render_config(replace(settings, swarm=False), PLUMBING), monkeypatch)
    (plain,) = [r for r in one.JupyterHub.load_roles if r["name"] == "board"]
    assert set(plain["scopes"]) == set(BOARD_SCOPES)


def test_the_spawner_keeps_its_node_and_why_its_lab_ended_once_stopped():
    spawner = RoomSwarmSpawner(user=SimpleNamespace(name="p01", id=1, url="/user/p01/"))
    spawner.load_state({"object_id": "s1", "node_id": "node1", "lost_with_node": "down"})
    spawner.clear_state()
    state = spawner.get_state()
    assert (state["node_id"], state["lost_with_node"]) == ("node1", "down")
    fresh = RoomSwarmSpawner(user=SimpleNamespace(name="p02", id=2, url="/user/p02/"))
    fresh.load_state({})
    assert "node_id" not in fresh.get_state() and "lost_with_node" not in fresh.get_state()
