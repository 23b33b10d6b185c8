"""`labkit room up --swarm`'s hub configuration, as JupyterHub loads it: labkit's SwarmSpawner subclass with each
participant's first node, the work volumes' labels, no room network, and a board that reads saved notebooks
through the hub (the volumes are on other machines) and judges them in grader services on the workers. The swarm itself: tests/test_room_swarm.py."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest
from test_room_hubconfig import PLUMBING, _load

from labkit.room import commands as room_cli
from labkit.room.board import service as board_service
from labkit.room.hub import swarm
from labkit.room.hub.hubconfig import SWARM_SPAWNER, render_config
from labkit.room.hub.swarmspawner import RoomSwarmSpawner
from labkit.room.protocol import ROOM_LABEL, WORK_LABEL
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
