"""`labkit room k8s`: the Zero to JupyterHub values rendered from RoomSettings, checked against the chart's
own values schema (chart 4.4.0, read from ../shared/z2jh at test time) and against JupyterHub's own traits."""

from __future__ import annotations

import copy
import stat

import jsonschema
import pytest
import yaml

import labkit
import labkit.errors
from labkit.room import RoomSettings
from labkit.room.hub import hubconfig
from labkit.room.k8s import values as k8s

CREDS = k8s.Credentials(user_password="workshop-pw", teacher_password="t" * 40)


def _as_override(schema: dict) -> dict:
    """helm validates the chart's defaults merged with our file, and the defaults hold every key the schema
    requires along its `properties` (hub.baseUrl, cull.enabled, ...). Keys required of entries we add
    ourselves (patternProperties, oneOf, items: an extraFiles entry's mountPath) stay required."""
    schema = copy.deepcopy(schema)

    def strip(node: dict) -> None:
        node.pop("required", None)
        for child in node.get("properties", {}).values():
            if isinstance(child, dict):
                strip(child)

    strip(schema)
    return schema


@pytest.fixture(scope="module")
def validator(z2jh_schema):
    return jsonschema.Draft7Validator(_as_override(z2jh_schema))


def _errors(validator, values: dict) -> list[str]:
    return sorted("/".join(map(str, e.absolute_path)) or "(root)" for e in validator.iter_errors(values))


@pytest.mark.parametrize(
    "settings, credentials, site",
    [
        (RoomSettings(), CREDS, ""),
        (
            RoomSettings(
                participants=RoomSettings.numbered(120),
                cpu=2,
                memory="3.5G",
                cull_idle_s=0,
                image="registry.example.org:5000/labkit/lab:23.12-cpu",
            ),
            CREDS,
            "",
        ),
        (
            RoomSettings(),
            None,
            "c.JupyterHub.authenticator_class = 'github'\nc.GitHubOAuthenticator.allowed_organizations = ['ours']\n",
        ),
    ],
)
def test_rendered_values_pass_the_charts_schema(validator, settings, credentials, site):
    values = k8s.values(settings, credentials, site_config=site)
    assert _errors(validator, values) == []
    assert _errors(validator, yaml.safe_load(k8s.dump(values))) == []  # the file as written, too


def test_the_schema_check_sees_what_the_chart_refuses(validator):
    values = k8s.values(RoomSettings(), CREDS)
    assert _errors(validator, {**values, "singluser": {}}) == ["(root)"]  # a misspelt section
    broken = copy.deepcopy(values)
    broken["singleuser"]["cpu"]["limit"] = "2"  # the chart wants a number
    broken["singleuser"]["memory"]["limt"] = "2G"  # and knows no such key
    broken["cull"]["timeout"] = 3600.5
    broken["singleuser"]["storage"]["extraVolumes"] = "shm"
    assert _errors(validator, broken) == [
        "cull/timeout",
        "singleuser/cpu/limit",
        "singleuser/memory",
        "singleuser/storage/extraVolumes",
    ]


def test_values_carry_the_rooms_settings():
    settings = RoomSettings(
        participants=("ana", "bo"), cpu=1.5, memory="3G", cull_idle_s=1800, teacher="kim", shm_size="1G"
    )
    values = k8s.values(settings, CREDS)
    user = values["singleuser"]
    assert user["image"] == {"name": "labkit/lab", "tag": "23.12-cpu-hub5.5", "pullPolicy": "IfNotPresent"}
    assert user["cpu"] == {"limit": 1.5, "guarantee": 0.75} and user["memory"] == {"limit": "3G", "guarantee": "3G"}
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in user["storage"]["extraVolumes"]
    assert {"name": "shm", "mountPath": "/dev/shm"} in user["storage"]["extraVolumeMounts"]
    assert values["cull"] == {"enabled": True, "users": False, "timeout": 1800, "every": 60}
    assert user["cmd"] == hubconfig.START_COMMAND and user["storage"]["homeMountPath"] == hubconfig.WORK
    hub = values["hub"]
    assert hub["config"]["Authenticator"] == {"allowed_users": ["ana", "bo", "kim"], "admin_users": ["kim"]}
    # the board's parts (tests/unit/test_room_k8s_board.py), no site config
    assert set(hub) == {
        "config",
        "services",
        "loadRoles",
        "service",
        "networkPolicy",
        "extraContainers",
        "extraConfig",
    }  # extraConfig: the teacher lands on the board (10-labkit-teacher.py)
    assert k8s.values(settings.with_(cull_idle_s=0), CREDS)["cull"]["enabled"] is False


def test_a_site_authenticator_replaces_the_shared_password():
    values = k8s.values(RoomSettings(), None, site_config="c.JupyterHub.authenticator_class = 'github'\n")
    assert values["hub"]["config"] == {"Authenticator": {"admin_users": ["teacher"]}}
    assert values["hub"]["extraConfig"]["90-site.py"] == "c.JupyterHub.authenticator_class = 'github'\n"
    assert "90-site.py: |" in k8s.dump(values)  # a block scalar, readable in the file


@pytest.mark.parametrize(
    "changes, setting",
    [
        ({"memory": "2Gi"}, "memory"),  # Kubernetes' spelling: KubeSpawner refuses it at every spawn
        ({"memory": "2GB"}, "memory"),
        ({"memory": "G"}, "memory"),
        ({"memory": "-1G"}, "memory"),
        ({"memory": 2}, "memory"),
        ({"shm_size": "512Mi"}, "shm_size"),
        ({"cpu": 0}, "cpu"),
        ({"cpu": "2"}, "cpu"),
        ({"cpu": True}, "cpu"),
        ({"cull_idle_s": -1}, "cull_idle_s"),
        ({"cull_idle_s": 60.5}, "cull_idle_s"),
        ({"participants": ()}, "participants"),
        ({"participants": ("p01", "teacher")}, "participants"),
        ({"image": "labkit/lab@sha256:" + "0" * 64}, "image"),
    ],
)
def test_settings_the_chart_would_refuse_are_refused_before_rendering(changes, setting):
    with pytest.raises(labkit.errors.RoomSettingsError) as info:
        k8s.values(RoomSettings().with_(**changes), CREDS)
    assert info.value.setting == setting and isinstance(info.value, ValueError)


@pytest.mark.parametrize("memory", ["2G", "512M", "1.5G", "1T", "100K", "2Gi", "2GB", "2 G", "two G", "G", "2g"])
def test_memory_is_read_as_kubespawner_reads_it(memory):
    """KubeSpawner's mem_limit is JupyterHub's ByteSpecification: what it refuses, the check refuses."""
    from jupyterhub.traitlets import ByteSpecification
    from traitlets import TraitError

    try:
        ByteSpecification().validate(None, memory)
        accepted = True
    except TraitError:
        accepted = False
    try:
        k8s.check(RoomSettings(memory=memory))
        ours = True
    except labkit.errors.RoomSettingsError:
        ours = False
    assert ours == accepted, memory


def test_generated_passwords_satisfy_jupyterhubs_shared_password_authenticator():
    from jupyterhub.authenticators.shared import SharedPasswordAuthenticator
    from traitlets.config import Config

    config = k8s.values(RoomSettings(), k8s.Credentials.generate())["hub"]["config"]
    auth = SharedPasswordAuthenticator(config=Config(config))  # validates lengths and that the two differ
    assert auth.admin_users == {"teacher"} and "p06" in auth.allowed_users and "teacher" in auth.allowed_users
    assert auth.user_password != auth.admin_password


@pytest.mark.parametrize(
    "image, expected",
    [
        ("labkit/lab:23.12-cpu", ("labkit/lab", "23.12-cpu-hub5.5")),
        ("labkit/lab:23.12-cpu-hub5.5", ("labkit/lab", "23.12-cpu-hub5.5")),
        ("registry.example.org:5000/labkit/lab", ("registry.example.org:5000/labkit/lab", "latest-hub5.5")),
    ],
)
def test_the_chart_gets_the_lab_image_built_for_its_jupyterhub(image, expected):
    assert k8s.chart_image(image) == expected


def test_room_image_builds_the_tag_the_values_name():
    from labkit.room.hub import lab_image as image

    tag, extra, setup = image.for_jupyterhub(k8s.CHART_JUPYTERHUB)
    assert tag == ":".join(k8s.chart_image(image.PARTICIPANT_IMAGE)) == "labkit/lab:23.12-cpu-hub5.5"
    assert "jupyterhub==5.5.*" in extra and "'jupyterhub==5.5.*'" in setup and "6.1" not in setup
    assert image.KUBERNETES_CLIENT in extra and repr(image.KUBERNETES_CLIENT) in setup  # the board's Pods
    assert image.for_jupyterhub(image.HUB_JUPYTERHUB) == (image.PARTICIPANT_IMAGE, image.EXTRA, image.SETUP_SCRIPT)


def test_write_renders_a_private_values_file(tmp_path):
    target = k8s.write(RoomSettings(memory="3G"), tmp_path / "k8s", CREDS)
    assert target == tmp_path / "k8s" / "values.yaml"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert yaml.safe_load(target.read_text()) == k8s.values(RoomSettings(memory="3G"), CREDS)


def test_write_takes_the_sites_config_file_and_says_when_it_cannot(tmp_path):
    site = tmp_path / "site.py"
    site.write_text("c.JupyterHub.authenticator_class = 'github'\n")
    written = yaml.safe_load(k8s.write(RoomSettings(config_file=site), tmp_path / "out").read_text())
    assert written["hub"]["extraConfig"]["90-site.py"] == site.read_text()
    assert "SharedPasswordAuthenticator" not in written["hub"]["config"]
    with pytest.raises(labkit.errors.RoomSettingsError) as info:
        k8s.write(RoomSettings(config_file=tmp_path / "missing.py"), tmp_path / "out2")
    assert info.value.setting == "config_file" and not (tmp_path / "out2").exists()
    with pytest.raises(labkit.errors.RoomSettingsError) as info:
        k8s.write(RoomSettings(memory="2Gi"), tmp_path / "out3", CREDS)
    assert info.value.setting == "memory" and not (tmp_path / "out3").exists()


def test_the_command_writes_values_the_chart_accepts(validator, tmp_path, capsys):
    from labkit.cli import main

    assert main(["room", "k8s", "--out", str(tmp_path / "k8s"), "--participants", "40", "--memory", "3G"]) == 0
    written = yaml.safe_load((tmp_path / "k8s" / "values.yaml").read_text())
    assert _errors(validator, written) == []
    assert len(written["hub"]["config"]["Authenticator"]["allowed_users"]) == 41
    out = capsys.readouterr().out
    assert written["hub"]["config"]["SharedPasswordAuthenticator"]["user_password"] in out
    assert "--version 4.4.0" in out
    with pytest.raises(SystemExit) as info:  # room up's own option refuses it (a usage error)
        main(["room", "k8s", "--out", str(tmp_path / "bad"), "--memory", "3Gi"])
    assert info.value.code == 2 and not (tmp_path / "bad").exists()
