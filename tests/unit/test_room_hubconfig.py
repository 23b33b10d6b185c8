"""The room's jupyterhub_config.py, rendered from RoomSettings: loaded by traitlets as JupyterHub loads it,
with the limits, labels, names, services and roles a room needs, and no secret in its text."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from traitlets.config import Config

from labkit.errors import InvalidNameError, SetupError
from labkit.room import commands as room_cli
from labkit.room.hub.hubconfig import SECRET_ENV, WORK, Plumbing, render_config
from labkit.room.hub.lifecycle import read_participants
from labkit.room.hub.processes import command_for
from labkit.room.protocol import ROOM_LABEL
from labkit.room.settings import RoomSettings

PLUMBING = Plumbing(
    hub_ip="172.30.0.1",
    hub_port=41001,
    proxy_api_port=41002,
    board_port=41003,
    proxy_command=("/opt/chp/bin/configurable-http-proxy",),
    python="/env/bin/python",
)
SECRETS = {name: f"secret-{key}-value" for key, name in SECRET_ENV.items()}


def _load(text: str, monkeypatch: pytest.MonkeyPatch, site: list[str] | None = None) -> Config:
    """Execute the rendered file as JupyterHub does (get_config, load_subconfig), secrets in the environment."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    c = Config()
    loaded = site if site is not None else []
    exec(
        compile(text, "jupyterhub_config.py", "exec"),
        {"get_config": lambda: c, "load_subconfig": loaded.append, "__name__": "__main__"},
    )
    return c


def test_same_settings_same_text_and_no_secret_in_it(tmp_path):
    settings = RoomSettings(directory=tmp_path / "room", participants=RoomSettings.numbered(3))
    text = render_config(settings, PLUMBING)
    assert text == render_config(settings, PLUMBING)
    for value in SECRETS.values():
        assert value not in text
    other = render_config(settings.with_(cpu=2.0), PLUMBING)
    assert other != text


def test_limits_labels_names_network_volumes(tmp_path, monkeypatch):
    settings = RoomSettings(
        directory=tmp_path / "room", participants=("ada", "bob"), cpu=1.5, memory="3G", shm_size="256M", port=18123
    )
    c = _load(render_config(settings, PLUMBING), monkeypatch)
    spawner = c.DockerSpawner
    assert (spawner.cpu_limit, spawner.mem_limit) == (1.5, "3G")
    assert spawner.extra_host_config["shm_size"] == "256m"
    assert spawner.extra_create_kwargs["labels"][ROOM_LABEL] == settings.room_id
    assert spawner.prefix == f"labkit-{settings.room_id}" and spawner.name_template == "{prefix}-{raw_username}"
    assert spawner.network_name == settings.network and spawner.use_internal_ip
    assert spawner.volumes == {f"labkit-room-{settings.room_id}-{{raw_username}}": WORK}
    assert spawner.pull_policy == "never" and not spawner.remove  # restarts reuse the container
    assert c.JupyterHub.bind_url == "http://:18123"
    assert (c.JupyterHub.hub_ip, c.JupyterHub.hub_port) == ("172.30.0.1", 41001)
    assert c.Authenticator.allowed_users == {"ada", "bob"} and c.Authenticator.admin_users == {"teacher"}
    assert c.SharedPasswordAuthenticator.user_password == SECRETS["LABKIT_ROOM_USER_PASSWORD"]
    assert c.JupyterHub.api_tokens == {SECRETS["LABKIT_ROOM_TEACHER_TOKEN"]: "teacher"}
    assert c.JupyterHub.db_url.endswith(str(settings.directory.absolute() / "jupyterhub.sqlite"))


def test_services_and_roles(tmp_path, monkeypatch):
    settings = RoomSettings(directory=tmp_path / "room", cull_idle_s=900)
    c = _load(render_config(settings, PLUMBING), monkeypatch)
    services = {s["name"]: s for s in c.JupyterHub.services}
    folder = settings.directory.absolute() / "processes"
    board = ["/env/bin/python", "-m", "labkit.room.board.service", "--room-dir", str(settings.directory.absolute())]
    # each records itself first (labkit.room.hub.processes), so that a hub that dies leaves nothing unknown
    assert services["board"]["command"] == command_for(settings.directory, "board", board, "/env/bin/python")
    assert services["board"]["command"][:4] == ["/env/bin/python", "-m", "labkit.room.hub.processes", str(folder)]
    assert services["idle-culler"]["command"][4:6] == ["idle-culler", "--"]
    assert c.ConfigurableHTTPProxy.command == [
        "/env/bin/python",
        "-m",
        "labkit.room.hub.processes",
        str(folder),
        "proxy",
        "--",
        "/opt/chp/bin/configurable-http-proxy",
    ]
    assert services["board"]["url"] == "http://127.0.0.1:41003"
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/other.sock")
    again = {s["name"]: s for s in _load(render_config(settings, PLUMBING), monkeypatch).JupyterHub.services}
    assert again["board"]["environment"]["DOCKER_HOST"] == "unix:///tmp/other.sock"  # the board reaches the engine
    assert "--timeout=900" in services["idle-culler"]["command"]
    roles = {r["name"]: r for r in c.JupyterHub.load_roles}
    assert roles["teacher"]["users"] == ["teacher"]
    assert roles["teacher"]["scopes"] == ["access:services!service=board"]
    assert "delete:servers" in roles["idle-culler"]["scopes"] and roles["idle-culler"]["services"] == ["idle-culler"]
    assert "user" not in roles  # participants keep JupyterHub's default role: their own server only
    without = _load(render_config(settings.with_(board=False), PLUMBING), monkeypatch)
    assert [s["name"] for s in without.JupyterHub.services] == ["idle-culler"]
    assert "board" not in {r["name"] for r in without.JupyterHub.load_roles}


def test_site_config_is_loaded_last(tmp_path, monkeypatch):
    site_file = tmp_path / "oauth.py"
    loaded: list[str] = []
    text = render_config(RoomSettings(directory=tmp_path / "room", config_file=site_file), PLUMBING)
    _load(text, monkeypatch, loaded)
    assert loaded == [str(site_file)]
    assert text.rstrip().splitlines()[-1].startswith("load_subconfig(")
    assert "load_subconfig" not in render_config(RoomSettings(directory=tmp_path / "room"), PLUMBING)


def test_room_ids_differ_per_directory(tmp_path):
    a, b = RoomSettings(directory=tmp_path / "a"), RoomSettings(directory=tmp_path / "b")
    assert a.room_id != b.room_id and a.network != b.network
    assert RoomSettings.numbered(3) == ("p01", "p02", "p03") and RoomSettings.numbered(120)[0] == "p001"


def test_participants_file(tmp_path):
    names = tmp_path / "names.csv"
    names.write_text("login,password\nAda,x\nbob\n\n# a comment\ncy-3\n")
    assert read_participants(names) == ("ada", "bob", "cy-3")
    names.write_text("ada\nbad name\n")
    with pytest.raises(InvalidNameError) as bad:
        read_participants(names)
    assert bad.value.name == "bad name"
    names.write_text("ada\nada\n")
    with pytest.raises(InvalidNameError):
        read_participants(names)
    with pytest.raises(SetupError) as missing:
        read_participants(tmp_path / "nope.csv")
    assert missing.value.missing == str(tmp_path / "nope.csv")


def test_command_line_options():
    parser = argparse.ArgumentParser()
    room_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "room",
            "up",
            "--participants",
            "4",
            "--cpu",
            "0.5",
            "--memory",
            "1g",
            "--cull-idle-s",
            "60",
            "--port",
            "9000",
            "--dir",
            "r",
        ]
    )
    assert (args.participants, args.cpu, args.memory, args.cull_idle_s, args.port, Path(args.dir)) == (
        4,
        0.5,
        "1G",
        60,
        9000,
        Path("r"),
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["room", "up", "--memory", "lots"])
    with pytest.raises(SystemExit):
        parser.parse_args(["room", "up", "--participants", "3", "--participants-file", "f"])
    assert parser.parse_args(["room", "down", "--delete-work"]).delete_work


def test_status_of_a_folder_that_holds_no_room(tmp_path):
    from labkit.cli import EXIT_LABKIT_ERROR, main
    from labkit.room.record import read as read_room

    assert main(["room", "status", "--dir", str(tmp_path)]) == EXIT_LABKIT_ERROR
    with pytest.raises(SetupError) as exc:
        read_room(tmp_path)
    assert exc.value.missing == str(tmp_path / "room.json")
