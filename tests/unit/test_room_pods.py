"""The room's grader on Kubernetes (labkit.room.k8s.pods): the Pod and NetworkPolicy it writes, checked against
Kubernetes 1.31's own schemas (strict: no unknown field) and Kubernetes' name rules; a pod's status read
into a verdict; and PodGrader where no cluster is (for real: no API server runs here, and none is faked).
The calls that talk to a live API server (create, poll, delete) are not exercised here."""

from __future__ import annotations

import json
import re
import socket

import kubernetes.client
import kubernetes_validate
import pytest

from labkit.course.exercises import REGISTRY
from labkit.errors import RoomSettingsError, SetupError
from labkit.room.grader import sandbox
from labkit.room.grader.entry import fit
from labkit.room.grader.runner import Limits
from labkit.room.k8s import pods
from labkit.room.protocol import ENV, Submission, exercises_of

K8S = "1.31"
NASTY = ["Ann_Marie.Very-Long-Name" * 3, "ZOË", "__", "a", "-x-", "1234", "x" * 300, "José.García@uni"]
# Kubernetes' own rules (apimachinery's validation): the schemas do not check names and labels
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (
        (not prefix or (len(prefix) <= 253 and bool(DNS_SUBDOMAIN.match(prefix))))
        and len(name) <= 63
        and bool(LABEL_NAME.match(name))
    )


def _label_value_ok(value: str) -> bool:
    return value == "" or (len(value) <= 63 and bool(LABEL_NAME.match(value)))


def _submission(user: str = "p01") -> Submission:
    return Submission(user, "01_python_backend.ipynb", {"01-output2": "print('mine')\n", "01-other": "x = 1"})


def _manifest(**changes) -> dict:
    args = {
        "room_id": "3fa2c9d1",
        "image": "registry.example/labkit/grader:23.12-cpu",
        "limits": Limits(cpu=1.5, memory="2g", timeout_s=300.5),
        "name": pods.pod_name("p01"),
        **changes,
    }
    return pods.pod_manifest(_submission(), **args)


def test_the_pod_and_the_policy_pass_kubernetes_strict_schemas():
    assert kubernetes_validate.validate(_manifest(), K8S, strict=True) == K8S
    assert kubernetes_validate.validate(pods.network_policy("3fa2c9d1"), K8S, strict=True) == K8S


def test_the_schema_check_can_fail():
    wrong = _manifest()
    wrong["spec"]["activeDeadlineSecond"] = wrong["spec"].pop("activeDeadlineSeconds")  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, K8S, strict=True)
    wrong = pods.network_policy("3fa2c9d1")
    wrong["spec"]["podSelector"]["matchLabels"]["x"] = 3  # a label value is a string
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, K8S, strict=True)


def test_the_pod_runs_unprivileged_without_token_services_or_restarts():
    spec = _manifest()["spec"]
    (container,) = spec["containers"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    for context in (spec["securityContext"], container["securityContext"]):
        assert context["runAsNonRoot"] is True and context["runAsUser"] == 1000
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "hostNetwork" not in spec and "serviceAccountName" not in spec
    assert container["command"][:3] == ["python3", "-m", "labkit.room.grader.entry"]
    assert container["command"][3:6] == ["--submission", "--result-file", "/dev/termination-log"]
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["workingDir"] == "/tmp"
    assert container["image"] == "registry.example/labkit/grader:23.12-cpu"


def test_the_pod_has_the_limits_as_requests_its_deadline_and_shared_memory():
    spec = _manifest()["spec"]
    (container,) = spec["containers"]
    assert container["resources"]["limits"] == {"cpu": "1500m", "memory": "2Gi"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert spec["activeDeadlineSeconds"] == 301  # 300.5 s, whole seconds up
    (volume,) = spec["volumes"]
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Mi"}
    assert {"name": volume["name"], "mountPath": "/dev/shm"} in container["volumeMounts"]


def test_the_environment_carries_the_submission_and_decodes_back():
    (container,) = _manifest()["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert Submission.decode(env[ENV]) == _submission()
    assert env["HOME"] == "/tmp/grader-home" and env["PYTHONUNBUFFERED"] == "1"


def test_labels_are_valid_and_the_policy_selects_the_graders_and_cuts_all_traffic():
    metadata = _manifest()["metadata"]
    policy = pods.network_policy("3fa2c9d1")
    for labels in (metadata["labels"], policy["metadata"]["labels"], policy["spec"]["podSelector"]["matchLabels"]):
        assert all(_label_key_ok(k) and _label_value_ok(v) for k, v in labels.items())
    assert all(_label_key_ok(k) for k in metadata["annotations"])
    selected = policy["spec"]["podSelector"]["matchLabels"]
    assert selected.items() <= metadata["labels"].items()
    assert selected == pods.selector("3fa2c9d1")
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert policy["spec"]["ingress"] == [] and policy["spec"]["egress"] == []  # no rule: nothing allowed
    assert len(policy["metadata"]["name"]) <= 253 and DNS_SUBDOMAIN.match(policy["metadata"]["name"])
    assert pods.selector("another1") != selected  # another room's graders are not this room's


@pytest.mark.parametrize("user", NASTY)
def test_pod_names_are_dns_labels_for_any_login(user):
    name = pods.pod_name(user)
    assert len(name) <= 63 and DNS_LABEL.match(name), name
    assert pods.pod_name(user) != name  # a random suffix: two runs of one user do not clash
    assert kubernetes_validate.validate(_manifest(name=name), K8S, strict=True) == K8S


@pytest.mark.parametrize(
    "docker,quantity",
    [
        ("2g", "2Gi"),
        ("512m", "512Mi"),
        ("2G", "2Gi"),
        ("1024k", "1024Ki"),
        ("1.5g", "1.5Gi"),
        ("1t", "1Ti"),
        ("1073741824", "1073741824"),
        ("4096b", "4096"),
    ],
)
def test_memory_sizes_become_kubernetes_quantities(docker, quantity):
    assert sandbox.memory_quantity(docker) == quantity


@pytest.mark.parametrize("bad", ["2Gi", "lots", "0g", "-1g", "1.5", "g", ""])
def test_a_size_docker_would_not_read_is_refused(bad):
    with pytest.raises(RoomSettingsError) as raised:
        sandbox.memory_quantity(bad)
    assert raised.value.setting == "grader_memory" and raised.value.value == bad


@pytest.mark.parametrize("bad", [0, -1, True, "1"])
def test_a_cpu_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(RoomSettingsError) as raised:
        _manifest(limits=Limits(cpu=bad))
    assert raised.value.setting == "grader_cpu"


# A grader pod's status, as the API answers it (`kubectl get pod -o json`), read into a verdict.


def _pod(phase: str, state: dict | None = None, **status) -> dict:
    containers = [{"name": "grader", "ready": False, "restartCount": 0, "state": state}] if state else []
    return {"kind": "Pod", "status": {"phase": phase, "containerStatuses": containers, **status}}


LIMITS = Limits(memory="2g", timeout_s=60)
IMAGE = "registry.example/labkit/grader:23.12-cpu"
RESULT = {
    "notebook": "01_python_backend.ipynb",
    "network": ["lo", "eth0"],
    "error": "",
    "results": [{"exercise": "01-output2", "passed": True, "problem": "", "hint": "h", "started": True}],
}


def test_a_finished_pods_message_is_the_result():
    done = _pod("Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed", "message": json.dumps(RESULT)}})
    assert pods.read_pod(done, LIMITS, IMAGE) == RESULT


@pytest.mark.parametrize(
    "pod,kind",
    [
        (_pod("Failed", {"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": ""}}), "out-of-memory"),
        (
            _pod(
                "Failed",
                {"terminated": {"exitCode": 137, "reason": "Error", "message": "Running cell 4"}},
                reason="DeadlineExceeded",
            ),
            "timeout",
        ),
        (
            _pod(
                "Failed",
                reason="DeadlineExceeded",
                message="Pod was active on the node longer than the specified deadline",
            ),
            "timeout",
        ),
        (
            _pod(
                "Failed",
                {
                    "terminated": {
                        "exitCode": 1,
                        "reason": "Error",
                        "message": "Traceback (most recent call "
                        "last):\nlabkit.errors.tools.SubmissionError: not a submission",
                    }
                },
            ),
            "no-result",
        ),
        (
            _pod("Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed", "message": '{"results": [{"exer'}}),
            "no-result",
        ),
        (_pod("Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed", "message": "[]"}}), "no-result"),
        (_pod("Pending", {"waiting": {"reason": "ErrImagePull", "message": "pull access denied"}}), "image"),
        (_pod("Pending", {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}), "image"),
        (_pod("Pending", {"waiting": {"reason": "InvalidImageName", "message": "invalid reference format"}}), "image"),
        (_pod("Failed", reason="Evicted", message="The node was low on resource: memory."), "pod-failed"),
    ],
)
def test_a_pod_that_gives_no_result_says_why(pod, kind):
    stopped = pods.read_pod(pod, LIMITS, IMAGE)
    assert isinstance(stopped, pods.Stopped) and stopped.kind == kind and stopped.why


@pytest.mark.parametrize(
    "pod",
    [
        {"kind": "Pod", "status": {"phase": "Pending"}},  # just created: no status yet
        _pod(
            "Pending",
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient memory.",
                }
            ],
        ),
        _pod("Pending", {"waiting": {"reason": "ContainerCreating"}}),
        _pod("Running", {"running": {"startedAt": "2026-11-25T17:00:00Z"}}),
    ],
)
def test_a_pod_on_its_way_is_waited_for(pod):
    assert pods.read_pod(pod, LIMITS, IMAGE) is None


# PodGrader where no cluster is: an error verdict the board can show, never a raw exception.


@pytest.fixture
def no_cluster(monkeypatch):
    """This process as outside any pod (a CI runner may itself be one)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


def _assert_unjudged(judgement, submission):
    assert judgement.error and judgement.user == submission.user and judgement.notebook == submission.notebook
    assert [r.exercise for r in judgement.results] == exercises_of(submission.notebook)
    assert all(not r.passed and r.started and r.problem == judgement.error for r in judgement.results)


@pytest.mark.parametrize("service", [None, ("127.0.0.1", "1")])
def test_outside_a_cluster_judge_is_an_error_verdict_and_prepare_a_setup_error(no_cluster, monkeypatch, service):
    if service is not None:  # a service address, but no service account token: not a pod either
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", service[0])
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", service[1])
    grader = pods.PodGrader("3fa2c9d1", IMAGE)
    _assert_unjudged(grader.judge(_submission()), _submission())
    with pytest.raises(SetupError) as raised:
        grader.prepare()
    assert raised.value.reason == "not in a cluster" and raised.value.missing
    grader.close()  # nothing to remove, nothing raised


def test_an_api_that_does_not_answer_is_an_error_verdict(no_cluster):
    with socket.socket() as probe:  # a port with nothing listening once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.retries = False
    api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    grader = pods.PodGrader("3fa2c9d1", IMAGE, namespace="room", api=api)
    _assert_unjudged(grader.judge(_submission()), _submission())
    with pytest.raises(SetupError) as raised:
        grader.prepare()
    assert raised.value.reason == "unreachable"
    grader.close()
    api.api_client.close()


def test_a_submission_too_large_for_a_pod_is_an_error_verdict(no_cluster):
    import os

    huge = Submission("p01", "01_python_backend.ipynb", {"01-output2": os.urandom(150_000).hex()})
    _assert_unjudged(pods.PodGrader("3fa2c9d1", IMAGE).judge(huge), huge)
    bad_limits = pods.PodGrader("3fa2c9d1", IMAGE, limits=Limits(memory="2Gi"))
    _assert_unjudged(bad_limits.judge(_submission()), _submission())


# The inside half's --result-file: what a termination message can hold.


def test_fit_keeps_a_long_result_within_a_termination_message():
    notebook = max({x.notebook for x in REGISTRY.values()}, key=lambda n: len(exercises_of(n)))
    results = [
        {"exercise": e, "passed": False, "problem": "Zeile ü " * 2000, "hint": "h" * 9000, "started": True}
        for e in exercises_of(notebook)
    ]
    result = {
        "notebook": notebook + ".ipynb",
        "network": ["lo"],
        "error": "é" * 5000,
        "results": results,
        "stopped": "cell 3",
        "skipped": 2,
    }
    text = fit(result, pods.RESULT_LIMIT)
    assert len(text.encode()) <= pods.RESULT_LIMIT
    back = json.loads(text)
    assert [(r["exercise"], r["passed"], r["started"]) for r in back["results"]] == [
        (r["exercise"], r["passed"], r["started"]) for r in results
    ]
    assert back["notebook"] == result["notebook"] and back["network"] == ["lo"]
    assert back["results"][0]["problem"] and result["results"][0]["problem"].startswith(back["results"][0]["problem"])


def test_fit_leaves_a_short_result_whole():
    assert json.loads(fit(RESULT, pods.RESULT_LIMIT)) == RESULT
