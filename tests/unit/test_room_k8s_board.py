"""The board's part of `labkit room k8s`: a sidecar of the hub's pod, wired as the chart 4.4.0 and
JupyterHub read it (ports, the chart's Secret, roles), its container and the grader Pods' NetworkPolicy
checked against Kubernetes' own schemas (kubernetes-validate, offline)."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from labkit.room import RoomSettings
from labkit.room.board import service as board
from labkit.room.grader.runner import Limits
from labkit.room.k8s import pods, values as k8s
from labkit.room.protocol import Submission
from labkit.room.settings import BOARD_SCOPES

CREDS = k8s.Credentials(user_password="workshop-pw", teacher_password="t" * 40)
KUBERNETES = "1.31"
SETTINGS = RoomSettings(participants=("ann", "bob"), teacher="tess")


def _hub(settings: RoomSettings = SETTINGS) -> dict:
    return k8s.values(settings, CREDS)["hub"]


def test_the_proxy_reaches_the_board_on_one_port_everywhere():
    hub = _hub()
    url = hub["services"]["board"]["url"]
    port = int(url.rsplit(":", 1)[1])
    assert url == f"http://hub:{port}"  # the chart's hub Service (fullnameOverride "": plain `hub`)
    assert hub["service"]["extraPorts"] == [{"name": "board", "port": port, "targetPort": port}]
    [sidecar] = hub["extraContainers"]
    assert sidecar["ports"] == [{"name": "board", "containerPort": port}]
    [rule] = hub["networkPolicy"]["ingress"]
    assert rule["ports"] == [{"port": port}]
    env = {e["name"]: e for e in sidecar["env"]}
    assert env["JUPYTERHUB_SERVICE_URL"]["value"] == f"http://0.0.0.0:{port}"


def test_the_board_gets_the_charts_token_and_only_its_scopes():
    hub = _hub()
    env = {e["name"]: e for e in hub["extraContainers"][0]["env"]}
    # z2jh's jupyterhub_config.py reads a service's token from its Secret `hub` under this key
    assert env["JUPYTERHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "hub",
        "key": "hub.services.board.apiToken",
    }
    assert "api_token" not in hub["services"]["board"] and "apiToken" not in hub["services"]["board"]
    assert hub["loadRoles"]["board"] == {
        "description": hub["loadRoles"]["board"]["description"],
        "services": ["board"],
        "scopes": list(BOARD_SCOPES),
    }
    assert hub["loadRoles"]["teacher"]["users"] == ["tess"]
    assert hub["loadRoles"]["teacher"]["scopes"] == ["access:services!service=board"]
    assert env["JUPYTERHUB_CLIENT_ID"]["value"] == "service-board"  # JupyterHub's default for a service "board"
    assert env["JUPYTERHUB_API_URL"]["value"] == "http://localhost:8081/hub/api"


def test_the_board_command_is_one_the_board_accepts():
    sidecar = _hub()["extraContainers"][0]
    command = sidecar["command"]
    assert command[:3] == ["python3", "-m", "labkit.room.board.service"]
    args = board.parser().parse_args(command[3:])
    assert (args.notebooks, args.grader, args.labs_url) == ("jupyter", "kubernetes", "http://proxy-public")
    assert args.participants == "ann,bob" and args.room_id == SETTINGS.room_id
    assert args.grader_image == sidecar["image"] == k8s.grader_image(SETTINGS) == "labkit/grader:23.12-cpu-hub5.5"


def test_the_board_container_is_one_kubernetes_accepts():
    sidecar = _hub()["extraContainers"][0]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hub"}, "spec": {"containers": [sidecar]}}
    kubernetes_validate.validate(pod, KUBERNETES, strict=True)
    broken = {**sidecar, "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"nme": "hub"}}}]}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**pod, "spec": {"containers": [broken]}}, KUBERNETES, strict=True)


def test_without_the_board_the_values_hold_none_of_it(tmp_path):
    hub = _hub(SETTINGS.with_(board=False))
    assert not {"services", "loadRoles", "extraContainers", "service", "networkPolicy"} & set(hub)
    k8s.write(SETTINGS.with_(board=False), tmp_path, CREDS)
    assert not (tmp_path / k8s.POLICY_FILE).exists()


def test_write_puts_the_grader_pods_policy_beside_the_values(tmp_path):
    k8s.write(SETTINGS, tmp_path, CREDS)
    policy = yaml.safe_load((tmp_path / k8s.POLICY_FILE).read_text())
    kubernetes_validate.validate(policy, KUBERNETES, strict=True)
    pod = pods.pod_manifest(
        Submission("ann", "01_python_backend.ipynb", {}),
        room_id=SETTINGS.room_id,
        image=k8s.grader_image(SETTINGS),
        limits=Limits(),
        name=pods.pod_name("ann"),
    )
    selected = policy["spec"]["podSelector"]["matchLabels"]
    assert selected and all(pod["metadata"]["labels"].get(k) == v for k, v in selected.items())
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert not policy["spec"].get("ingress") and not policy["spec"].get("egress")  # nothing in, nothing out


def test_the_command_names_the_grader_image_the_cluster_pulls(tmp_path, capsys):
    from labkit.cli import main

    image = "registry.example.org:5000/teach/grader:23.12-cpu"
    assert main(["room", "k8s", "--out", str(tmp_path), "--participants", "2", "--grader-image", image]) == 0
    written = yaml.safe_load((tmp_path / "values.yaml").read_text())
    [sidecar] = written["hub"]["extraContainers"]
    expected = "registry.example.org:5000/teach/grader:23.12-cpu-hub5.5"
    assert sidecar["image"] == expected and sidecar["command"][-1] == expected
    out = capsys.readouterr().out
    assert f"apply -f {tmp_path / k8s.POLICY_FILE}" in out and expected in out
