"""The room's grader on Docker Swarm (`labkit room up --swarm`): each run is one Swarm service on a worker,
made, watched and removed through the manager's engine, the only engine the board talks to.

- **The submission** goes into a Swarm config, which the manager hands to the node that runs the task; it is
  mounted read-only as a file that ``entry --submission-file`` reads (no worker's engine is asked to copy it).
- **The sandbox** is the one engine's (labkit.room.grader.sandbox: an ordinary user, every capability dropped,
  CPU, memory and process limits, /dev/shm), placed on a worker (``node.role==worker``), with no restart:
  a run that fails is judged again by the board, never restarted by Swarm.
- **The verdict** is the result line of the service's logs, read through the manager once its task ends.
  The service, its config and its network are removed after it, whatever happened.

What Swarm does not give, and what is done instead (Docker 20.10, API 1.41, as Debian ships it):

- **No network mode "none".** A service joins swarm networks only, and the only predefined ones are ``host``
  and ``bridge``; a swarm-scoped ``null`` network is refused (no such plugin), and a bridge's options
  (``enable_icc``, ``inhibit_ipv4``) are not applied on the nodes. So each run joins an internal bridge
  network of its own: no route off its node and no other container on it. The grader still sees an ``eth0``
  (``Judgement.network`` is ``["eth0", "lo"]``, not ``["lo"]`` as on one engine), and through it the worker
  host's own listening ports, which on one engine it could not reach.
- **No no-new-privileges** (a service's ``Privileges.NoNewPrivileges`` needs API 1.44): the grader's user is
  an ordinary one without capabilities all the same.
- **Cold graders only.** The one-engine Grader keeps a container warm and copies the submission into it; a
  service's configs are fixed when it is made, and copying into its container would mean reaching into the
  worker's engine. So each run starts its kernel after the submission is there.

A run without verdicts is named from Docker's task states (never from error text), and the board judges it
again (``Judgement.retry``), as a killed container is on one engine: a task ``rejected`` (the image missing on
the node), ``orphaned``, ``shutdown`` or given up by Swarm (its node drained: desired state ``shutdown``), one
whose node the manager marks down (its task may still read "running": nothing hears from the node), one no worker
started in time, one that ran past its time, one whose logs hold no whole result.

    grader = SwarmGrader(docker.from_env(), room_id)   # the manager's engine
    grader.judge(submission)                             # a Judgement; never raises
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import docker.errors
from docker.types import ConfigReference

from ...docker.engine_errors import ENGINE_ERRORS, engine_error, explanation_of
from ...errors import SubmissionError
from ..hub.swarm import describe, manager_address
from ..protocol import RESULT_MARK, ROLE_LABEL, ROOM_LABEL, Submission
from ..settings import GRADER_IMAGE
from .runner import Judgement, judgement_of, unjudged
from .sandbox import GraderRun, Limits

log = logging.getLogger("labkit.room.grader")

ROLE = "grader"
SUBMISSION_PATH = "/run/labkit-submission"  # where the config is mounted in the grader's container
START_MARGIN_S = 120.0  # from the service made to its task running (scheduling, the container's start)
POLL_S = 0.5  # between two looks at a run's task
STOP_GRACE_NS = 2 * 10**9  # a removed grader is killed after this (nothing in it is worth waiting for)
STARTING = {"new", "allocated", "pending", "assigned", "accepted", "preparing", "ready", "starting"}
ENDED = {"complete", "failed"}  # the container ran and exited: its logs say what it found
GIVEN_UP = {"shutdown", "rejected", "orphaned", "remove"}  # Swarm stopped it, or never started it
COMMAND = ("python3", "-m", "labkit.room.grader.entry", "--submission-file", SUBMISSION_PATH)


@dataclass(frozen=True)
class TaskView:
    """What a run's task says at one look: its state, the state Swarm wants, its node, exit code, message."""

    state: str
    desired: str
    node: str
    exit_code: int | None
    message: str

    @classmethod
    def of(cls, task: dict[str, Any]) -> TaskView:
        status = task.get("Status") or {}
        code = (status.get("ContainerStatus") or {}).get("ExitCode")
        message = status.get("Err") or status.get("Message") or ""
        return cls(status.get("State", ""), task.get("DesiredState", ""), task.get("NodeID", ""), code, message)


def given_up(task: TaskView, node: str) -> str:
    """Why a task that Swarm stopped or never started gave no verdict (judged again), by its state."""
    where = f" on node {node}" if node else ""
    if task.state == "rejected":
        return f"Swarm could not start it{where} (rejected: {task.message}); is the grader image on every worker?"
    if task.state == "orphaned":
        return f"its node stopped answering the swarm{where} (task orphaned)"
    if task.state not in GIVEN_UP:  # Swarm gave it up while it still runs there, or while its node is away
        return f"Swarm is shutting it down{where} before it gave a verdict (its node drained or down)"
    return f"Swarm stopped it{where} before it gave a verdict (task {task.state}: its node drained or down)"


def ended(task: TaskView, logs: str, memory: str) -> tuple[dict[str, Any], str]:
    """A finished task's result line (and "") or ({}, why there is none)."""
    lines = [line for line in logs.splitlines() if line.startswith(RESULT_MARK)]
    if lines:
        try:
            return json.loads(lines[-1][len(RESULT_MARK) :]), ""
        except ValueError:
            return {}, "its result line was cut short"
    if task.state == "complete":
        return {}, "it ended without its result line in its logs (the logs were cut short)"
    if task.exit_code in (137, 143):  # 128 + SIGKILL, SIGTERM: out of memory, or stopped
        return {}, f"it was killed (exit code {task.exit_code}: out of its {memory} of memory, or stopped)"
    tail = " | ".join(logs.strip().splitlines()[-3:]) or "no output"
    return {}, f"it ended (exit code {task.exit_code}) without verdicts: {tail}"


class SwarmGrader:
    """Judges submissions of room ``room_id`` in grader services on the workers of the swarm that ``client``
    (docker-py, the manager's engine) manages; the grader ``image`` must be on the workers (`room up
    --swarm` puts it there). See the module's docstring."""

    def __init__(
        self,
        client: Any,
        room_id: str,
        image: str = GRADER_IMAGE,
        limits: Limits = Limits(),
        start_s: float = START_MARGIN_S,
    ) -> None:
        self.client = client
        self.room_id = room_id
        self.image = image
        self.limits = limits
        self.start_s = start_s
        self.labels = {ROOM_LABEL: room_id, ROLE_LABEL: ROLE}

    def prepare(self) -> None:
        """Checks that the engine manages the swarm (SetupError says where to run) and removes the graders a
        board that was killed left. Nothing is built: the workers hold the image."""
        try:
            manager_address(self.client)
        except ENGINE_ERRORS as exc:
            raise engine_error(
                exc, "ask the engine about its swarm", "check DOCKER_HOST (the manager's engine)"
            ) from None
        self.close()

    def judge(self, submission: Submission) -> Judgement:
        """Run ``submission`` in a grader service on a worker and collect its verdicts (see the module)."""
        t0 = time.monotonic()
        try:
            text = submission.encode()
        except SubmissionError as exc:
            return unjudged(submission.user, submission.notebook, str(exc), 0.0)
        out, why = self.run(text, f"{submission.user}'s {submission.notebook}")
        return judgement_of(submission, out, why, time.monotonic() - t0)

    def run(self, data: str, what: str = "a run", command: tuple[str, ...] = COMMAND) -> tuple[dict[str, Any], str]:
        """One grader service of ``command``, with ``data`` in the file SUBMISSION_PATH: the result line it
        printed (parsed) and "", or {} and why there is none. Its service, config and network are removed
        after it (in the background: the verdict does not wait). Never raises."""
        name = f"labkit-{self.room_id}-grader-{secrets.token_hex(4)}"
        made: list[Any] = []
        try:
            return self._run(name, data, list(command), made, what)
        except ENGINE_ERRORS as exc:
            return {}, f"the swarm's manager refused the grader service ({explanation_of(exc)})"
        finally:
            threading.Thread(target=_remove, args=(made,), name="grader-remove", daemon=True).start()

    def close(self) -> None:
        """Remove the room's grader services, configs and networks still there."""
        label = {"label": [f"{k}={v}" for k, v in self.labels.items()]}
        try:
            things = list(self.client.services.list(filters=label))
            things += self.client.configs.list(filters=label) + self.client.networks.list(filters=label)
        except ENGINE_ERRORS as exc:
            log.warning("could not list the room's grader services (%s); `labkit room down` removes them", exc)
            return
        _remove(things)

    def _run(self, name: str, data: str, command: list[str], made: list[Any], what: str) -> tuple[dict[str, Any], str]:
        """Make the run's network, config and service (each appended to ``made`` at once, for removal) and
        watch its task to the end."""
        made.append(
            self.client.networks.create(name, driver="bridge", scope="swarm", internal=True, labels=self.labels)
        )
        config = self.client.configs.create(name=name, data=data.encode(), labels=self.labels)
        made.append(config)
        arguments = GraderRun(self.image, command, self.limits, labels=self.labels).service_arguments()
        service = self.client.services.create(
            **arguments,
            name=name,
            networks=[name],
            configs=[ConfigReference(config.id, name, filename=SUBMISSION_PATH, uid="0", gid="0", mode=0o444)],
            constraints=["node.role==worker"],
            stop_grace_period=STOP_GRACE_NS,
        )
        made.insert(0, service)  # removed first: its config and network are in use until it goes
        return self._watch(service, what)

    def _watch(self, service: Any, what: str) -> tuple[dict[str, Any], str]:
        """Look at the service's task until it ends, Swarm gives it up, or its time is spent."""
        made_at, running_since, node = time.monotonic(), None, ""
        while True:
            tasks = sorted(service.tasks(), key=lambda t: t.get("CreatedAt", ""))
            task = TaskView.of(tasks[-1]) if tasks else TaskView("new", "running", "", None, "")
            if task.node and not node:
                node = self._node_name(task.node)
                log.info("grader of %s on node %s", what, node)
            if task.state in ENDED:
                logs = b"".join(service.logs(stdout=True, stderr=True)).decode(errors="replace")
                return ended(task, logs, self.limits.memory)
            if task.state in GIVEN_UP or task.desired in GIVEN_UP:
                return {}, given_up(task, node)
            if task.node and self._node_down(
                task.node
            ):  # the manager cannot hear from a dead node: its task may still read "running"
                return {}, f"its node {node} went down before it gave a verdict"
            now = time.monotonic()
            if task.state in STARTING and now - made_at > self.start_s:
                return {}, f"no worker started it within {self.start_s:.0f} s (task {task.state}: {task.message})"
            if task.state == "running":
                running_since = running_since or now
                if now - running_since > self.limits.timeout_s:
                    return {}, f"it took longer than {self.limits.timeout_s:.0f} s and was stopped"
            time.sleep(POLL_S)

    def _node_down(self, node_id: str) -> bool:
        try:
            return str(self.client.nodes.get(node_id).attrs["Status"]["State"]) == "down"
        except ENGINE_ERRORS:
            return False

    def _node_name(self, node_id: str) -> str:
        try:
            return describe(self.client.nodes.get(node_id).attrs)
        except ENGINE_ERRORS:
            return node_id


def _remove(things: list[Any]) -> None:
    """Remove a run's service, then its config and network (in use until the service is gone)."""
    for thing in things:
        for _ in range(20):
            try:
                thing.remove()
                break
            except docker.errors.NotFound:
                break
            except ENGINE_ERRORS as exc:
                if getattr(exc, "status_code", None) not in (409, 500):  # in use a moment longer
                    log.warning("could not remove %s (%s); `labkit room down` removes it", thing.name, exc)
                    break
                time.sleep(0.5)
