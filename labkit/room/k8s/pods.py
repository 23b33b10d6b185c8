"""The room's grader on Kubernetes: each grader run is one bare Pod of the grader image.

On the Zero to JupyterHub chart (4.4.0) the board runs beside the hub, with the hub pod's service account,
whose Role allows pods get/watch/list/create/delete and nothing more (no pods/log, no deletecollection, no
NetworkPolicies, no Jobs). So a run is a Pod that gets its submission through one environment variable
(``LABKIT_SUBMISSION``) and hands its verdicts back through its termination message (at most 4096 bytes,
read from the pod's status: no log access needed). The NetworkPolicy that cuts graders off the network
(``network_policy``) is applied once by the teacher with kubectl; it takes effect only where the cluster's
network plugin enforces policies (Calico, Cilium, ...). A Pod's spec has no process limit, so
``Limits.pids`` is not applied here (the nearest is the kubelet's ``podPidsLimit``, a node setting).

    grader = PodGrader(room_id, "registry.example/labkit/grader:23.12-cpu")
    grader.judge(submission)          # a Judgement; never raises (outside a cluster: an error verdict)
"""

from __future__ import annotations

import json
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ...errors import RoomSettingsError, SetupError, SubmissionError, WaitTimeoutError
from ...plumbing.polling import wait_until
from ..grader.runner import Judgement, judgement_of
from ..grader.sandbox import GraderRun, Limits
from ..protocol import ENV, ROOM_LABEL, Submission
from ..settings import GRADER_IMAGE

POD_ROLE_LABEL = "labkit.room/role"  # Docker's "labkit.room.role", as a prefixed Kubernetes label key
ROLE = "grader"
USER_ANNOTATION = "labkit.room/user"
NOTEBOOK_ANNOTATION = "labkit.room/notebook"
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
RESULT_LIMIT = 4096  # Kubernetes keeps at most this many bytes of a termination message
START_MARGIN_S = 120.0  # scheduling and an image pull, before the pod's own deadline starts counting
REQUEST_TIMEOUT_S = 30.0
POLL_S = 1.0  # between two reads of a grader pod's status
COMMAND = [
    "python3",
    "-m",
    "labkit.room.grader.entry",
    "--submission",
    "--result-file",
    "/dev/termination-log",
    "--result-limit",
    str(RESULT_LIMIT),
]
_STUCK = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
}  # waiting reasons that do not pass by waiting
_NAME_ROOM = 40  # of a pod name's 63 characters, for the login


def pod_name(user: str) -> str:
    """A fresh pod name for ``user``'s run: ``labkit-grader-<login as DNS-1123>-<random>``, at most 63
    characters, whatever the login (uppercase, underscores, dots, non-ASCII, very long)."""
    slug = re.sub(r"[^a-z0-9]+", "-", user.lower()).strip("-")[:_NAME_ROOM].strip("-") or "user"
    return f"labkit-grader-{slug}-{secrets.token_hex(4)}"


def selector(room_id: str) -> dict[str, str]:
    """The labels of room ``room_id``'s grader pods (what the NetworkPolicy and ``close`` select)."""
    return {ROOM_LABEL: room_id, POD_ROLE_LABEL: ROLE}


def pod_manifest(
    submission: Submission, *, room_id: str, image: str = GRADER_IMAGE, limits: Limits = Limits(), name: str
) -> dict[str, Any]:
    """The Pod (API shape) of one grader run on ``submission``: no service account token, no network
    services, an ordinary user with no capabilities, requests equal to ``limits``, stopped by Kubernetes
    after ``limits.timeout_s``. It passes the "restricted" Pod Security Standard. SubmissionError
    "too-large" when the cells do not fit an environment variable; RoomSettingsError for bad limits."""
    run = GraderRun(image, COMMAND, limits, {ENV: submission.encode()}, selector(room_id))
    container = {
        **run.pod_container(ROLE),
        "terminationMessagePath": "/dev/termination-log",
        # a crash before the result is written: the log's tail becomes the message (no pods/log needed)
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": selector(room_id),
            "annotations": {USER_ANNOTATION: submission.user, NOTEBOOK_ANNOTATION: submission.notebook},
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": max(1, math.ceil(limits.timeout_s)),
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": run.pod_security(),
            "containers": [container],
            "volumes": run.pod_volumes(),
        },
    }


def network_policy(room_id: str) -> dict[str, Any]:
    """A NetworkPolicy (API shape) that denies room ``room_id``'s grader pods all ingress and egress
    (the teacher applies it once: the hub's Role cannot create it)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"labkit-grader-{room_id}-no-network", "labels": {ROOM_LABEL: room_id}},
        "spec": {
            "podSelector": {"matchLabels": selector(room_id)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }


@dataclass(frozen=True)
class Stopped:
    """Why a grader pod gave no result: ``kind`` in fixed words ("out-of-memory", "timeout", "image",
    "no-result", "pod-failed", "not-started"), ``why`` in words that say what to fix."""

    kind: str
    why: str


def read_pod(pod: dict[str, Any], limits: Limits, image: str) -> dict[str, Any] | Stopped | None:
    """What a grader pod (API shape, as read) says so far: the inside half's result (a dict), why there
    will be none (Stopped), or None while it is pending or running (an unschedulable pod too: a cluster's
    autoscaler may still add a node)."""
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    state = (containers[0].get("state") or {}) if containers else {}
    phase, pod_reason = status.get("phase"), status.get("reason") or ""
    late = Stopped("timeout", f"it took longer than {limits.timeout_s:.0f} s and was stopped")
    if state.get("terminated"):
        end = state["terminated"]
        message = end.get("message") or ""
        try:
            result = json.loads(message)
        except ValueError:
            result = None
        if isinstance(result, dict) and isinstance(result.get("results"), list):
            return result
        if end.get("reason") == "OOMKilled":
            return Stopped(
                "out-of-memory",
                f"it used all of its {limits.memory} of memory and was stopped "
                "(OOMKilled); give the grader more memory (--grader-memory)",
            )
        if pod_reason == "DeadlineExceeded":
            return late
        tail = " | ".join(message.strip().splitlines()[-3:])[-300:] or "no message"
        return Stopped(
            "no-result",
            f"the grader ended with exit code {end.get('exitCode')} "
            f"({end.get('reason') or 'no reason'}) without a result: {tail}",
        )
    waiting = state.get("waiting") or {}
    if waiting.get("reason") in _STUCK:
        return Stopped(
            "image",
            f"Kubernetes cannot start the grader image {image} ({waiting['reason']}: "
            f"{(waiting.get('message') or '')[:300]}); check the image's name and that the "
            "cluster's nodes can pull it",
        )
    if phase == "Failed":
        return (
            late
            if pod_reason == "DeadlineExceeded"
            else Stopped(
                "pod-failed",
                f"the grader pod failed ({pod_reason or 'no reason'}: {(status.get('message') or '')[:300]})",
            )
        )
    if phase == "Succeeded":
        return Stopped("no-result", "the grader pod ended without a container status")
    return None


def _pending(pod: dict[str, Any], waited_s: float) -> Stopped:
    """A pod still not done after ``waited_s``: its phase, and the scheduler's reason when it has one."""
    status = pod.get("status") or {}
    unscheduled = [
        c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled" and c.get("status") == "False"
    ]
    note = (
        (
            f"not scheduled ({unscheduled[0].get('reason')}: {(unscheduled[0].get('message') or '')[:300]}); "
            "the cluster lacks room for the grader's requests"
        )
        if unscheduled
        else f"in phase {status.get('phase') or 'unknown'}"
    )
    return Stopped("not-started" if unscheduled else "timeout", f"no result after {waited_s:.0f} s: the pod was {note}")


def from_cluster(namespace: str | None = None) -> tuple[Any, str]:
    """(CoreV1Api, namespace) from this pod's service account: the namespace it runs in unless given.
    SetupError when this is not a pod of a cluster or the kubernetes package is missing."""
    try:
        import kubernetes.client
        import kubernetes.config
    except ImportError:
        raise SetupError(
            needed_by="The room's Kubernetes grader",
            remedy="pip install 'labkit[room]'",
            missing="kubernetes",
            reason="not installed",
        ) from None
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException as exc:
        raise SetupError(
            needed_by="The Kubernetes grader (it runs its pods with the service account of the pod it runs in)",
            detail=str(exc),
            remedy="Run the board as the hub pod's sidecar (see `labkit room k8s`), or grade with Docker (`labkit room up`)",
            missing="Kubernetes service account",
            reason="not in a cluster",
        ) from None
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration)), namespace or _namespace()


def _namespace() -> str:
    try:
        return NAMESPACE_FILE.read_text().strip()
    except OSError as exc:
        raise SetupError(
            needed_by="The Kubernetes grader (the pod's namespace)",
            detail=exc.strerror or "",
            remedy="give PodGrader a namespace",
            missing=str(NAMESPACE_FILE),
            reason="unreadable",
        ) from None


def _api_errors() -> tuple[type[BaseException], ...]:
    """What the kubernetes client raises on a refusal or a broken connection."""
    import urllib3.exceptions
    from kubernetes.client.exceptions import OpenApiException

    return OpenApiException, urllib3.exceptions.HTTPError, OSError, ValueError


def _refusal(exc: BaseException, doing: str) -> str:
    """An API error in words that say what to fix."""
    status = getattr(exc, "status", None)
    if status is None:
        return f"no usable answer from the Kubernetes API while {doing} ({type(exc).__name__}: {str(exc)[:300]})"
    try:
        detail = json.loads(getattr(exc, "body", None) or "{}").get("message", "")
    except (ValueError, AttributeError):
        detail = ""
    fix = {
        401: "; the service account's token was refused",
        403: "; the hub's service account needs pods "
        "get/list/create/delete in this namespace (the chart's hub Role gives them)",
    }.get(status, "")
    return f"the Kubernetes API refused {doing}: {status} {getattr(exc, 'reason', '')} {detail[:300]}{fix}"


class PodGrader:
    """Judges submissions in grader pods of room ``room_id`` (a namespace's pods labelled with it). ``api``:
    a kubernetes CoreV1Api (default: this pod's service account, made on first use)."""

    def __init__(
        self,
        room_id: str,
        image: str = GRADER_IMAGE,
        limits: Limits = Limits(),
        namespace: str | None = None,
        api: Any = None,
    ) -> None:
        self.room_id = room_id
        self.image = image
        self.limits = limits
        self.namespace = namespace
        self._api = api
        self._own_api = api is None
        self._lock = threading.Lock()  # the board judges from several threads; one client serves them all

    @property
    def api(self) -> Any:
        """The CoreV1Api (made from the pod's service account on first use); SetupError outside a cluster."""
        with self._lock:
            if self._api is None:
                self._api, self.namespace = from_cluster(self.namespace)
            elif self.namespace is None:
                self.namespace = _namespace()
            return self._api

    def prepare(self) -> None:
        """Nothing to build (the image comes from a registry); checks that the API answers and lets this
        account list pods. SetupError when it does not."""
        api = self.api
        try:
            api.list_namespaced_pod(
                self.namespace, label_selector=_selector_text(self.room_id), limit=1, _request_timeout=REQUEST_TIMEOUT_S
            )
        except _api_errors() as exc:
            raise SetupError(
                needed_by=f"The grader (to list pods in namespace {self.namespace})",
                detail=_refusal(exc, "listing pods"),
                remedy="check the grader's service account and role",
                missing="Kubernetes API",
                reason="unreachable" if getattr(exc, "status", None) is None else "refused",
            ) from None

    def judge(self, submission: Submission) -> Judgement:
        """Run ``submission`` in a grader pod and collect its verdicts; the pod is deleted whatever
        happens. Every failure (no cluster, a refusal, a pull error, a timeout) is an error verdict."""
        t0 = time.monotonic()

        def failed(why: str) -> Judgement:
            return judgement_of(submission, {}, why, time.monotonic() - t0)

        try:
            body = pod_manifest(
                submission, room_id=self.room_id, image=self.image, limits=self.limits, name=pod_name(submission.user)
            )
            api = self.api
        except (SubmissionError, RoomSettingsError, SetupError) as exc:
            return failed(str(exc))
        name, doing = body["metadata"]["name"], "creating the grader pod"
        try:
            api.create_namespaced_pod(self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S)
            doing = f"watching the grader pod {name}"
            outcome = self._wait(api, name)
        except _api_errors() as exc:
            return failed(_refusal(exc, doing))
        finally:
            self._delete(api, name)
        if isinstance(outcome, Stopped):
            return failed(outcome.why)
        return judgement_of(submission, outcome, "", time.monotonic() - t0)

    def _wait(self, api: Any, name: str) -> dict[str, Any] | Stopped:
        """Poll the pod until ``read_pod`` has an outcome, or the run's time and a start margin are spent."""
        last: list[dict[str, Any]] = [{}]

        def outcome() -> dict[str, Any] | Stopped | None:
            response = api.read_namespaced_pod(
                name, self.namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
            )
            last[0] = json.loads(response.data)
            return read_pod(last[0], self.limits, self.image)

        limit_s = self.limits.timeout_s + START_MARGIN_S
        try:
            # mypy solves wait_until's T as the whole union; it returns only a true value, never None
            return cast(
                "dict[str, Any] | Stopped", wait_until(outcome, limit_s, f"the grader pod {name}", interval_s=POLL_S)
            )
        except WaitTimeoutError:
            return _pending(last[0], limit_s)

    def _delete(self, api: Any, name: str) -> None:
        try:
            api.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0, _request_timeout=REQUEST_TIMEOUT_S)
        except _api_errors():
            pass  # gone already, or the API is away: close() sweeps the room's graders by label

    def close(self) -> None:
        """Delete this room's grader pods still there (one by one: the hub's Role has no deletecollection)."""
        try:
            api = self.api
        except SetupError:
            return  # never connected outside a cluster: no pods of ours
        try:
            pods = api.list_namespaced_pod(
                self.namespace, label_selector=_selector_text(self.room_id), _request_timeout=REQUEST_TIMEOUT_S
            ).items
        except _api_errors():
            pods = []
        for pod in pods:
            self._delete(api, pod.metadata.name)
        if self._own_api:
            with self._lock:
                self._api = None
            api.api_client.close()


def _selector_text(room_id: str) -> str:
    return ",".join(f"{key}={value}" for key, value in selector(room_id).items())
