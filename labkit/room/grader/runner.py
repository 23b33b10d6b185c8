"""The room's grader: a participant's saved notebook judged outside their kernel, in a container.

The grader image (``labkit/grader:23.12-cpu``) is the participant image plus labkit's full package (the
checks and the reference solutions) and the pristine notebooks. A grader run is given one Submission
(a saved notebook's exercise cells) in its environment and sees no participant's files; it has no
network, limited CPU, memory and processes, and runs as an ordinary user. Inside, the exercise cells are
put into the pristine notebook, which runs with a real kernel and a real Triton as ``labkit workshop
check`` does; the verdicts come back as one JSON line (and, on Kubernetes, as the termination message).
The hub and the board never run participant code, and the grader's kernel runs none of their Python
(labkit.room.grader.vetting): their models run in Triton's processes, and the verdicts are read from the check
cells' outputs, which only the kernel writes.

The outside half is here: the board's Runner, which starts a grader container and reads its verdicts.
The inside half, ``python -m labkit.room.grader.entry``, is labkit.room.grader.entry.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import docker.errors

from ...course.catalogue import exercises_of
from ...docker.engine_errors import ENGINE_ERRORS
from ...errors import SubmissionError
from ..cleanup import remove_containers
from ..cpu_cost import remove_cgroup
from ..protocol import (
    INBOX,
    READY_FILE,
    RESULT_MARK,
    ROLE_LABEL,
    ROOM_LABEL,
    SUBMISSION_FILE,
    RoomVerdict,
    Submission,
)
from ..settings import GRADER_IMAGE
from .image import build_grader_image, tar_of
from .sandbox import GraderRun, Limits

log = logging.getLogger("labkit.room.grader")


@dataclass(frozen=True)
class Judgement:
    """One grader run: a verdict per exercise judged (and per exercise still as shipped); ``error`` says
    why the run gave no verdicts of its own (then every exercise of the notebook is "not yet" with it).
    ``retry``: the run failed for a reason outside the participant's code (its container killed or gone, the
    engine's error, the grader's own time limit, a result cut short): no verdict, the board judges it again."""

    user: str
    notebook: str
    results: list[RoomVerdict]
    seconds: float
    error: str = ""
    network: list[str] = field(default_factory=list)  # the interfaces the run saw (only "lo": no network)
    retry: bool = False
    cpu_s: float | None = None  # the run's core-seconds, as the grader read its own cgroup (None: not reported)


def unjudged(user: str, notebook: str, why: str, seconds: float) -> Judgement:
    """A run that gave no verdicts of its own: every exercise of the notebook "not yet", saying ``why``."""
    return Judgement(user, notebook, [RoomVerdict.unjudged(e, why) for e in exercises_of(notebook)], seconds, why)


def judgement_of(submission: Submission, result: dict[str, Any], why: str, seconds: float) -> Judgement:
    """A grader run's outcome, by one rule for every runner: its verdicts, unless the runner says ``why``
    there are none (the run failed: judged again) or the inside half's ``result`` holds an error (then every
    exercise is "not yet" with it)."""
    error, retry = why or str(result.get("error") or ""), bool(why)
    cpu_s = result.get("cpu_s")
    cpu_s = float(cpu_s) if isinstance(cpu_s, (int, float)) and cpu_s >= 0 else None
    try:
        verdicts = [RoomVerdict.from_json(r) for r in result["results"]] if not error else []
    except (KeyError, TypeError, ValueError) as exc:
        error, retry = f"its result is not the grader's ({exc})", True
    if error:
        run = unjudged(
            submission.user, submission.notebook, f"the grader could not judge this notebook ({error})", seconds
        )
        return replace(run, retry=retry, cpu_s=cpu_s)
    network = list(result.get("network") or [])
    return Judgement(submission.user, submission.notebook, verdicts, seconds, network=network, cpu_s=cpu_s)


class Runner(Protocol):
    """Where a Submission is judged: a Docker container here (Grader), a Kubernetes Pod on a cluster."""

    image: str

    def prepare(self) -> None:
        """Make the grader ready (build its image); LabkitError says what is missing."""

    def judge(self, submission: Submission) -> Judgement:
        """Run the grader on ``submission``; a run that fails is a Judgement with ``error``, never a raise."""

    def close(self) -> None:
        """Remove every grader run of the room still there."""


class Grader:
    """Runs grader containers for room ``room_id`` on the engine ``client`` (docker-py). ``base``: the
    participant image to build the grader image from in ``prepare`` (empty: the image must exist).

    ``warm`` containers are started ahead, each with its kernel up, waiting for one submission: a
    verdict then costs only the cells that judge it. Each container still judges one submission and is
    removed, so no participant's code meets another's; a new one warms up while the last one judges.
    ``cgroup_parent``: the room's (labkit.room.cpu_cost.room_cgroup), where their CPU time is counted."""

    def __init__(
        self,
        client: Any,
        room_id: str,
        image: str = GRADER_IMAGE,
        limits: Limits = Limits(),
        base: str = "",
        warm: int = 0,
        cgroup_parent: str = "",
    ) -> None:
        self.client = client
        self.room_id = room_id
        self.image = image
        self.limits = limits
        self.base = base
        self.warm = warm
        self.cgroup_parent = cgroup_parent
        self._ready: list[Any] = []  # started, waiting for a submission
        self._lock = threading.Lock()

    def prepare(self) -> None:
        if self.base:
            build_grader_image(self.client, self.base, self.image)
        # a board that was killed could not remove its warm graders: this board removes them before its own
        remove_containers(self.client, self.room_id, "grader")
        for _ in range(self.warm):
            self._warm_one()

    def judge(self, submission: Submission) -> Judgement:
        """Hand ``submission`` to a warm grader container (it sees no participant's files, only the
        submission the engine copies in) and collect its verdicts."""
        t0 = time.monotonic()
        user, notebook = submission.user, submission.notebook
        try:
            text = submission.encode()
        except SubmissionError as exc:
            return unjudged(user, notebook, str(exc), 0.0)
        out, error = self._run(text)
        return judgement_of(submission, out, error, time.monotonic() - t0)

    def close(self) -> None:
        with self._lock:
            self._ready.clear()
        remove_containers(self.client, self.room_id, "grader")
        if self.cgroup_parent:  # the scanner, the other container under it, is gone too (Board.sweep)
            remove_cgroup(self.cgroup_parent)

    def _start(self) -> Any:
        """A grader container, in the room's sandbox (labkit.room.grader.sandbox), waiting for its submission."""
        run = GraderRun(
            self.image,
            ["python3", "-m", "labkit.room.grader.entry", "--warm", INBOX],
            self.limits,
            labels={ROOM_LABEL: self.room_id, ROLE_LABEL: "grader"},
            cgroup_parent=self.cgroup_parent,
        )
        return self.client.containers.run(**run.docker_arguments())

    def _warm_one(self) -> None:
        """Start one more waiting container (errors are the judging run's to report)."""
        try:
            container = self._start()
        except ENGINE_ERRORS as exc:
            log.warning("could not start a warm grader (%s); the next submission starts its own", exc)
            return
        with self._lock:
            self._ready.append(container)

    def _take(self) -> Any:
        """A waiting container still running, else a new one; one more starts warming in the background."""
        with self._lock:
            ready, self._ready = self._ready, []
        container = None
        for candidate in ready:
            try:
                candidate.reload()
                running = candidate.status in ("created", "running")
            except ENGINE_ERRORS:
                running = False
            if container is None and running:
                container = candidate
            elif running:
                with self._lock:
                    self._ready.append(candidate)
            else:
                _remove(candidate)
        if self.warm:
            threading.Thread(target=self._warm_one, name="grader-warm", daemon=True).start()
        return container if container is not None else self._start()

    def _run(self, submission: str) -> tuple[dict[str, Any], str]:
        """Judge in a container; (its result line, "") or ({}, why not). The line is read as soon as it is
        printed (the kernel and Triton then stop with the container, which is removed in the background)."""
        container, late, timer = None, threading.Event(), None
        try:
            container = self._take()
            container.put_archive("/tmp", _inbox_archive(submission))

            def stop_late() -> None:
                late.set()
                _remove(container)

            timer = threading.Timer(self.limits.timeout_s, stop_late)
            timer.start()
            try:
                logs = _until_result(container.logs(stream=True, follow=True))
            finally:
                timer.cancel()
        except docker.errors.ImageNotFound:
            return {}, f"the image {self.image} is missing; build it with `labkit room up`"
        except ENGINE_ERRORS as exc:
            if late.is_set():
                return {}, f"it took longer than {self.limits.timeout_s:.0f} s and was stopped"
            return {}, f"the Docker engine refused the container: {exc}"
        finally:
            if late.is_set() and timer is not None:
                # stopped for its time: the timer's own removal ends before the verdict says so (a second removal
                # beside it would only be refused as already in progress, and the room would still list it)
                timer.join()
            elif container is not None:
                threading.Thread(target=_remove, args=(container,), name="grader-remove", daemon=True).start()
        if late.is_set():
            return {}, f"it took longer than {self.limits.timeout_s:.0f} s and was stopped"
        lines = [line for line in logs.splitlines() if line.startswith(RESULT_MARK)]
        if not lines:
            return {}, self._how_it_ended(container, logs)
        try:
            return json.loads(lines[-1][len(RESULT_MARK) :]), ""
        except ValueError:
            return {}, "its result line was cut short"

    def _how_it_ended(self, container: Any, logs: str) -> str:
        """Why a run's output ended without its result line, as its container's state tells."""
        try:
            container.reload()
            state = container.attrs.get("State") or {}
        except docker.errors.NotFound:
            return "its container was removed before it gave a verdict"
        except ENGINE_ERRORS as exc:
            return f"the Docker engine lost its container ({exc})"
        if state.get("OOMKilled"):
            return f"its container ran out of memory ({self.limits.memory}) before it gave a verdict"
        code = state.get("ExitCode")
        if state.get("Running") or code in (137, 143):  # 128 + SIGKILL, SIGTERM
            return f"its container was stopped (exit code {code}) before it gave a verdict"
        tail = " | ".join(logs.strip().splitlines()[-3:]) or "no output"
        return f"it ended (exit code {code}) without verdicts: {tail}"


def _until_result(stream: Any) -> str:
    """The container's output up to its result line (all of it when it ends without one)."""
    text = ""
    for chunk in stream:
        text += chunk.decode(errors="replace")
        if RESULT_MARK in text and text.endswith("\n"):
            break
    return text


def _inbox_archive(submission: str) -> bytes:
    """A tar of INBOX holding the submission, then the file that says it is whole."""
    folder = Path(INBOX).name
    return tar_of({f"{folder}/{SUBMISSION_FILE}": submission.encode(), f"{folder}/{READY_FILE}": b""})


def _remove(container: Any) -> None:
    try:
        container.remove(force=True, v=True)
    except ENGINE_ERRORS:
        pass  # already gone; the room's sweep (by label) removes what is left
