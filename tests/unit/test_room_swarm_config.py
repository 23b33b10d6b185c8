"""`labkit room up --swarm`'s hub configuration, as JupyterHub loads it: labkit's SwarmSpawner subclass with each
participant's first node, the work volumes' labels, no room network, and a board that reads saved notebooks
through the hub (the volumes are on other machines) and judges them in grader services on the workers. The swarm itself: tests/test_room_swarm.py."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest
from test_room_hubconfig import PLUMBING, _load

from labkit.errors import RoomSettingsError
from labkit.room import commands as room_cli, record
from labkit.room.board import service as board_service
from labkit.room.hub import node_engines, swarm
from labkit.room.hub.hubconfig import SWARM_SPAWNER, render_config
from labkit.room.hub.swarmspawner import RoomSwarmSpawner
from labkit.room.protocol import ROOM_LABEL, WORK_LABEL
from labkit.room.record import RoomRecord
from labkit.room.settings import RoomSettings

WORKERS = [{"ID": f"node{i}", "Status": {"Addr": f"10.0.0.{i}"}} for i in (1, 2)]


def test_swarm_config_names_the_subclass_its_placement_and_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = RoomSettings(participants=("p01", "p02", "p03"), directory=tmp_path / "room", swarm=True)
    plan = swarm.placement(settings.participants, WORKERS)
    assert plan == (("p01", "node1"), ("p02", "node2"), ("p03", "node1"))
    c = _load(render_config(settings, replace(PLUMBING, placement=plan)), monkeypatch)
    assert c.JupyterHub.spawner_class == SWARM_SPAWNER
    assert SWARM_SPAWNER == f"{RoomSwarmSpawner.__module__}.{RoomSwarmSpawner.__name__}"
    spawner = c.RoomSwarmSpawner
    assert spawner.placement == dict(plan)
    assert spawner.work_labels == {WORK_LABEL: settings.room_id, f"{ROOM_LABEL}.user": "{raw_username}"}
    assert spawner.volumes == {settings.volume("{raw_username}"): "/home/jovyan/work"}
    assert spawner.shm_bytes == 512 * 1024**2 and spawner.pull_policy == "skip"
    assert "network_name" not in spawner and "DockerSpawner" not in c  # no room network: labs on other machines
    board = next(s for s in c.JupyterHub.services if s["name"] == "board")
    args = board_service.parser().parse_args(board["command"][board["command"].index("--room-dir") :])
    assert (args.notebooks, args.labs_url) == ("jupyter", f"http://127.0.0.1:{settings.port}")
    assert args.grader == "swarm"


def test_one_machine_config_is_unchanged_by_the_swarm_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = RoomSettings(directory=tmp_path / "room")
    c = _load(render_config(settings, PLUMBING), monkeypatch)
    assert c.JupyterHub.spawner_class == "docker" and c.DockerSpawner.network_name == settings.network
    assert "RoomSwarmSpawner" not in c


def test_swarm_option_on_the_command_line():
    parser = room_cli.add_settings_options(argparse.ArgumentParser())
    assert room_cli.settings_from(parser.parse_args(["--swarm"])).swarm is True
    assert room_cli.settings_from(parser.parse_args([])).swarm is False


def test_node_engine_option_needs_swarm_and_is_recorded(tmp_path: Path):
    parser = room_cli.add_settings_options(argparse.ArgumentParser())
    args = parser.parse_args(["--swarm", "--node-engine", "ssh://me@w1", "--node-engine=tcp://w2:2376"])
    assert room_cli.settings_from(args).node_engines == ("ssh://me@w1", "tcp://w2:2376")
    with pytest.raises(RoomSettingsError) as refused:
        room_cli.settings_from(parser.parse_args(["--node-engine", "ssh://me@w1"]))
    assert refused.value.setting == "node_engines" and refused.value.value == "ssh://me@w1"
    # room.json keeps them for `room down`, and reads them back as a tuple
    RoomRecord(room_id="r1", swarm=True, node_engines=("ssh://me@w1",)).write(tmp_path)
    assert record.read_if_any(tmp_path).node_engines == ("ssh://me@w1",)  # type: ignore[union-attr]
    assert record.read_if_any(tmp_path / "none") is None


def test_room_down_takes_node_engines_too():
    parser = argparse.ArgumentParser()
    room_cli.register(parser.add_subparsers())
    args = parser.parse_args(["room", "down", "--delete-work", "--node-engine", "unix:///w1.sock"])
    assert args.node_engine == ["unix:///w1.sock"] and args.delete_work
    assert parser.parse_args(["room", "down"]).node_engine == []


def test_where_each_participants_work_is_read_from_the_hubs_own_database(tmp_path: Path):
    """`room down --delete-work` names the volumes on nodes it cannot reach from the node RoomSwarmSpawner kept in
    each participant's state, in a database JupyterHub's own code wrote."""
    from jupyterhub import orm

    assert node_engines.hub_placements(tmp_path) == {}  # no hub ever ran here
    db = orm.new_session_factory(f"sqlite:///{tmp_path / 'jupyterhub.sqlite'}")()
    for name, state in (("p01", {"node_id": "node1", "object_id": "s1"}), ("p02", {}), ("p03", {"node_id": "node2"})):
        user = orm.User(name=name)
        db.add(user)
        db.commit()
        db.add(orm.Spawner(user=user, name="", state=state))
    db.commit()
    db.close()
    assert node_engines.hub_placements(tmp_path) == {"p01": "node1", "p03": "node2"}
