"""Where the teacher lands and whether they get a lab, as the room's hub configuration and the Kubernetes
values render it (the behaviour itself, in a real hub and browser: tests/test_room_browser.py)."""

from __future__ import annotations

from labkit.room.hub.hubconfig import Plumbing, hub_config, render_config
from labkit.room.k8s import values as k8s
from labkit.room.settings import RoomSettings

PLUMBING = Plumbing("172.18.0.1", 41001, 41002, 41003, ("configurable-http-proxy",), "/usr/bin/python3")


def test_the_teacher_lands_on_the_board_and_gets_no_lab_unless_asked():
    text = render_config(RoomSettings(), PLUMBING)
    compile(text, "jupyterhub_config.py", "exec")
    assert "c.JupyterHub.default_url = labkit_landing" in text
    assert "c.Spawner.pre_spawn_hook = labkit_no_teacher_lab" in text
    assert text.index("def labkit_landing") < text.index("c.JupyterHub.default_url")
    assert "'services/board/'" in text and "--teacher-lab" in text
    with_lab = hub_config(RoomSettings(teacher_lab=True), PLUMBING)
    assert "pre_spawn_hook" not in with_lab["Spawner"]
    assert "def labkit_no_teacher_lab" not in render_config(RoomSettings(teacher_lab=True), PLUMBING)
    assert "'hub/admin'" in render_config(RoomSettings(board=False), PLUMBING)  # no board: the admin page


def test_kubernetes_values_say_the_same():
    creds = k8s.Credentials("p", "t" * 40)
    extra = k8s.values(RoomSettings(), creds)["hub"]["extraConfig"]["10-labkit-teacher.py"]
    compile(extra, "10-labkit-teacher.py", "exec")
    assert "c.JupyterHub.default_url = labkit_landing" in extra
    assert "c.KubeSpawner.pre_spawn_hook = labkit_no_teacher_lab" in extra
    assert (
        "pre_spawn_hook"
        not in k8s.values(RoomSettings(teacher_lab=True), creds)["hub"]["extraConfig"]["10-labkit-teacher.py"]
    )


def test_room_up_takes_teacher_lab():
    import argparse

    from labkit.room import commands as room_cli

    parser = argparse.ArgumentParser(prog="labkit")
    room_cli.register(parser.add_subparsers(dest="command", required=True))
    assert room_cli.settings_from(parser.parse_args(["room", "up"])).teacher_lab is False
    assert room_cli.settings_from(parser.parse_args(["room", "up", "--teacher-lab"])).teacher_lab is True
