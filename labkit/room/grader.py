"""The room's grader: a participant's saved notebook judged outside their kernel, in a container.

The grader image (``labkit/grader:23.12-cpu``) is the participant image plus labkit's full package (the
checks and the reference solutions) and the pristine notebooks. A grader run is given one Submission
(a saved notebook's exercise cells) in its environment and sees no participant's files; it has no
network, limited CPU, memory and processes, and runs as an ordinary user. Inside, the exercise cells are
put into the pristine notebook, which runs with a real kernel and a real Triton as ``labkit workshop
check`` does; the verdicts come back as one JSON line (and, on Kubernetes, as the termination message).
The hub and the board never run participant code, and the grader's kernel runs none of their Python
(labkit.room.vetting): their models run in Triton's processes, and the verdicts are read from the check
cells' outputs, which only the kernel writes.

    python -m labkit.room.grader --submission [--result-file F]   # the inside half (in the container)
    python -m labkit.room.grader --warm DIR   # the same, started before its submission arrives in DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import docker.errors
import requests.exceptions

from ..course.exercises import REGISTRY
from ..errors import SubmissionError
from ..plumbing.polling import wait_until
from . import slices
from .grader_image import HOME_IN_IMAGE, build_grader_image, tar_of
from .sandbox import GraderRun, Limits
from .settings import GRADER_IMAGE, ROOM_LABEL
from .submission import ENV, Submission, is_started
from .verdicts import RoomVerdict
from .vetting import refusal

RESULT_MARK = "LABKIT-GRADER-RESULT "
WARM_MARK = "LABKIT-GRADER-WARM"  # a warm grader's kernel is up: only its submission is awaited
INBOX = "/tmp/labkit-inbox"  # where the board puts a warm grader's submission
SUBMISSION_FILE, READY_FILE = "submission", "ready"
ROLE_LABEL = "labkit.room.role"
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


def exercises_of(notebook: str) -> list[str]:
    """The exercise ids of a notebook, by its file name or stem."""
    stem = Path(notebook).stem
    return sorted(e for e, x in REGISTRY.items() if x.notebook == stem)


def untouched_results(notebook: str) -> list[RoomVerdict]:
    """The verdicts of a notebook whose exercise cells are all as shipped: every exercise not started."""
    return [RoomVerdict.not_started(e) for e in exercises_of(notebook)]


def unjudged(user: str, notebook: str, why: str, seconds: float) -> Judgement:
    """A run that gave no verdicts of its own: every exercise of the notebook "not yet", saying ``why``."""
    return Judgement(user, notebook, [RoomVerdict.unjudged(e, why) for e in exercises_of(notebook)], seconds, why)


def judgement_of(submission: Submission, result: dict[str, Any], why: str, seconds: float) -> Judgement:
    """A grader run's outcome, by one rule for every runner: its verdicts, unless the runner says ``why``
    there are none (the run failed: judged again) or the inside half's ``result`` holds an error (then every
    exercise is "not yet" with it)."""
    error, retry = why or str(result.get("error") or ""), bool(why)
    try:
        verdicts = [RoomVerdict.from_json(r) for r in result["results"]] if not error else []
    except (KeyError, TypeError, ValueError) as exc:
        error, retry = f"its result is not the grader's ({exc})", True
    if error:
        run = unjudged(
            submission.user, submission.notebook, f"the grader could not judge this notebook ({error})", seconds
        )
        return replace(run, retry=retry)
    return Judgement(submission.user, submission.notebook, verdicts, seconds, network=list(result.get("network") or []))


def remove_containers(client: Any, room_id: str, role: str) -> None:
    """Remove room ``room_id``'s containers of ``role`` ("grader", "scan"); a warning when the engine
    refuses (`labkit room down` removes them later)."""
    try:
        for container in client.containers.list(
            all=True, filters={"label": [f"{ROOM_LABEL}={room_id}", f"{ROLE_LABEL}={role}"]}
        ):
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass  # removed meanwhile (a judged grader goes in the background)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        log.warning("could not remove the room's %s containers (%s); `labkit room down` does", role, exc)


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
    removed, so no participant's code meets another's; a new one warms up while the last one judges."""

    def __init__(
        self,
        client: Any,
        room_id: str,
        image: str = GRADER_IMAGE,
        limits: Limits = Limits(),
        base: str = "",
        warm: int = 0,
    ) -> None:
        self.client = client
        self.room_id = room_id
        self.image = image
        self.limits = limits
        self.base = base
        self.warm = warm
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

    def _start(self) -> Any:
        """A grader container, in the room's sandbox (labkit.room.sandbox), waiting for its submission."""
        run = GraderRun(
            self.image,
            ["python3", "-m", "labkit.room.grader", "--warm", INBOX],
            self.limits,
            labels={ROOM_LABEL: self.room_id, ROLE_LABEL: "grader"},
        )
        return self.client.containers.run(**run.docker_arguments())

    def _warm_one(self) -> None:
        """Start one more waiting container (errors are the judging run's to report)."""
        try:
            container = self._start()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
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
            except (docker.errors.DockerException, requests.exceptions.RequestException):
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
        container, late = None, threading.Event()
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
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            if late.is_set():
                return {}, f"it took longer than {self.limits.timeout_s:.0f} s and was stopped"
            return {}, f"the Docker engine refused the container: {exc}"
        finally:
            if container is not None:
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
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
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
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        pass  # already gone; the room's sweep (by label) removes what is left


# The inside half: runs in the grader container, on a participant's notebook.


def judge_cells(
    name: str,
    cells: dict[str, str],
    pristine: Path | None = None,
    judge: tuple[str, ...] = (),
    kernel: Any = None,
    work: Path | None = None,
) -> dict[str, Any]:
    """Run the participant's exercise ``cells`` in the pristine notebook ``name`` (labkit's own, from
    ``pristine``) and return the verdicts, each saying whether its cell was started. Only the cells that
    judge an exercise run (labkit.room.slices): those of ``judge``, else every started exercise; a cell
    still as shipped is "not started" without running. ``kernel``: a kernel already started in ``work``."""
    import nbformat

    from ..course.workshop import exercise_of, run_notebook

    template = (pristine or Path(HOME_IN_IMAGE) / "notebooks") / Path(name).name
    if not template.exists():
        return {
            "notebook": name,
            "results": [],
            "error": f"no notebook {Path(name).name} ships with labkit",
            "network": _interfaces(),
        }
    refused = {e: why for e, source in cells.items() if (why := refusal(e, source))}
    nb = nbformat.read(template, as_version=4)
    for cell in nb.cells:
        exercise = exercise_of(cell)
        if exercise in refused and exercise in REGISTRY:  # run the starter instead: the rest still runs
            cell.source = REGISTRY[exercise].starter()
        elif exercise in cells:
            cell.source = cells[exercise]
    started = {e: is_started(e, cells.get(e, "")) for e in (exercise_of(c) for c in nb.cells) if e is not None}
    chosen = [e for e in (judge or started) if started.get(e)]
    results = [r for r in untouched_results(name) if not started.get(r.exercise, True)]
    if not chosen:
        return {
            "notebook": name,
            "results": [r.to_json() for r in results],
            "stopped": "",
            "skipped": "",
            "network": _interfaces(),
        }
    folder = work or Path(tempfile.mkdtemp(prefix="labkit-grader-"))
    try:
        target = folder / Path(name).name
        nbformat.write(slices.sliced(nb, chosen), target)
        run = run_notebook(target, from_outputs=True, kernel=kernel)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    results += [RoomVerdict.of(v) for v in run.verdicts if v.exercise in chosen]
    results = [
        replace(r, passed=False, problem=refused[r.exercise], rule="grader-cell") if r.exercise in refused else r
        for r in results
    ]
    order = list(started)  # the notebook's order
    results.sort(key=lambda r: order.index(r.exercise) if r.exercise in order else len(order))
    return {
        "notebook": name,
        "results": [r.to_json() for r in results],
        "stopped": run.stopped,
        "skipped": run.skipped,
        "network": _interfaces(),
    }


def _interfaces() -> list[str]:
    return sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []


def fit(result: dict[str, Any], limit: int) -> str:
    """``result`` as JSON of at most ``limit`` bytes (Kubernetes keeps 4 KiB of a termination message):
    the verdicts, interfaces and error, with problems and hints cut shorter until it fits."""
    keep = 2000
    while True:
        short = {
            "notebook": result.get("notebook", ""),
            "network": result.get("network", []),
            "error": str(result.get("error", ""))[:keep],
            "results": [
                {**r, "problem": str(r.get("problem", ""))[:keep], "hint": str(r.get("hint", ""))[:keep]}
                for r in result.get("results", [])
            ],
        }
        text = json.dumps(short)
        if len(text.encode()) <= limit or keep == 0:
            return text
        keep //= 2


def wait_for_submission(inbox: Path, kernel: Any) -> Submission:
    """Start-up done (the kernel has imported labkit), wait for the board to put a submission in ``inbox``:
    SUBMISSION_FILE, then READY_FILE once it is whole (the engine unpacks the archive in order)."""
    client = kernel.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        client.execute_interactive("import labkit", timeout=120, store_history=False, output_hook=lambda msg: None)
    finally:
        client.stop_channels()
    print(WARM_MARK, flush=True)
    wait_until(lambda: (inbox / READY_FILE).exists(), 10**9, "a submission", interval_s=0.05)
    return Submission.decode((inbox / SUBMISSION_FILE).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit.room.grader",
        description="Judge the submission in $" + ENV + " or, with --warm, in a folder",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--submission", action="store_true", help=f"judge the exercise cells in ${ENV}")
    mode.add_argument("--warm", type=Path, metavar="DIR", help="start a kernel, then wait for a submission in DIR")
    parser.add_argument("--result-file", type=Path, help="also write the result there, cut to --result-limit bytes")
    parser.add_argument("--result-limit", type=int, default=4096)
    args = parser.parse_args(argv)
    # the sandbox's HOME (under /tmp) is made here: IPython warns on every start about one it cannot write
    Path(os.environ.get("HOME", tempfile.gettempdir())).mkdir(parents=True, exist_ok=True)
    kernel, work = None, None
    if args.warm:
        from jupyter_client.manager import KernelManager

        work = Path(tempfile.mkdtemp(prefix="labkit-grader-"))
        # ipc: the kernel talks over local sockets (the grader has no network)
        kernel = KernelManager(kernel_name="python3", transport="ipc", connection_file=str(work / "kernel.json"))
        kernel.start_kernel(cwd=str(work))
        submission = wait_for_submission(args.warm, kernel)
    else:
        submission = Submission.decode(os.environ.get(ENV, ""))
    result = judge_cells(submission.notebook, submission.cells, judge=submission.judge, kernel=kernel, work=work)
    print(RESULT_MARK + json.dumps(result), flush=True)
    if args.result_file is not None:
        args.result_file.write_text(fit(result, args.result_limit))
    if kernel is not None and kernel.has_kernel:  # after the answer: the board stops the container anyway
        kernel.shutdown_kernel(now=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
