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
    python -m labkit.room.grader 01_python_backend.ipynb           # the same on a saved notebook file
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
import shutil
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import docker.errors
import requests.exceptions

from ..errors import EngineError, SetupError, SubmissionError
from ..exercises import REGISTRY
from .settings import GRADER_IMAGE, PARTICIPANT_IMAGE, ROOM_LABEL
from .submission import ENV, Submission, exercise_cells, is_started
from .vetting import refusal

HOME_IN_IMAGE = "/opt/labkit-grader"  # labkit with its solutions, and the pristine notebooks beside it
RESULT_MARK = "LABKIT-GRADER-RESULT "
ROLE_LABEL = "labkit.room.role"
RECIPE_LABEL = "labkit.grader.recipe"
NOTEBOOKS = "[0-9][0-9]_*.ipynb"  # the workshop's notebooks, by name
log = logging.getLogger("labkit.room.grader")


def participant_volume(room_id: str, user: str) -> str:
    """The Docker volume holding ``user``'s work in room ``room_id`` (mounted in their lab container)."""
    return f"labkit-room-{room_id}-{user}"


@dataclass(frozen=True)
class Limits:
    """What one grader container may use; ``timeout_s`` ends a run that takes longer."""

    cpu: float = 1.0
    memory: str = "2g"
    pids: int = 512
    timeout_s: float = 600.0


@dataclass(frozen=True)
class Judgement:
    """One grader run: per exercise ``{"exercise", "passed", "problem", "hint", "started"}``; ``error`` says
    why the run gave no verdicts of its own (then every exercise of the notebook is "not yet" with it)."""

    user: str
    notebook: str
    results: list[dict[str, Any]]
    seconds: float
    error: str = ""
    network: list[str] = field(default_factory=list)  # the interfaces the run saw (only "lo": no network)


def exercises_of(notebook: str) -> list[str]:
    """The exercise ids of a notebook, by its file name or stem."""
    stem = Path(notebook).stem
    return sorted(e for e, x in REGISTRY.items() if x.notebook == stem)


def untouched_results(notebook: str) -> list[dict[str, Any]]:
    """The verdicts of a notebook whose exercise cells are all as shipped: every exercise not started."""
    return [{"exercise": e, "passed": False, "problem": "", "hint": REGISTRY[e].hint, "started": False}
            for e in exercises_of(notebook)]


def unjudged(user: str, notebook: str, why: str, seconds: float) -> Judgement:
    """A run that gave no verdicts of its own: every exercise of the notebook "not yet", saying ``why``."""
    results = [{"exercise": e, "passed": False, "problem": why, "hint": REGISTRY[e].hint, "started": True}
               for e in exercises_of(notebook)]
    return Judgement(user, notebook, results, seconds, why)


def remove_containers(client: Any, room_id: str, role: str) -> None:
    """Remove room ``room_id``'s containers of ``role`` ("grader", "scan"); a warning when the engine
    refuses (`labkit room down` removes them later)."""
    try:
        for container in client.containers.list(
                all=True, filters={"label": [f"{ROOM_LABEL}={room_id}", f"{ROLE_LABEL}={role}"]}):
            container.remove(force=True, v=True)
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
    participant image to build the grader image from in ``prepare`` (empty: the image must exist)."""

    def __init__(self, client: Any, room_id: str, image: str = GRADER_IMAGE, limits: Limits = Limits(),
                 base: str = "") -> None:
        self.client = client
        self.room_id = room_id
        self.image = image
        self.limits = limits
        self.base = base

    def prepare(self) -> None:
        if self.base:
            build_image(self.client, self.base, self.image)

    def judge(self, submission: Submission) -> Judgement:
        """Run the grader container on ``submission`` (given in its environment: it sees no participant's
        files) and collect its verdicts."""
        t0 = time.monotonic()
        user, notebook = submission.user, submission.notebook
        try:
            environment = {ENV: submission.encode()}
        except SubmissionError as exc:
            return unjudged(user, notebook, str(exc), 0.0)
        out, error = self._run(["python3", "-m", "labkit.room.grader", "--submission"], environment)
        seconds = time.monotonic() - t0
        error = error or str(out.get("error", ""))
        if error:
            return unjudged(user, notebook, f"the grader could not judge this notebook ({error})", seconds)
        return Judgement(user, notebook, out["results"], seconds, network=out.get("network", []))

    def close(self) -> None:
        remove_containers(self.client, self.room_id, "grader")

    def _run(self, command: list[str], environment: dict[str, str]) -> tuple[dict[str, Any], str]:
        """Run a container of the grader image to its end; (its result line, "") or ({}, why not)."""
        container = None
        try:
            container = self.client.containers.run(
                self.image, command, detach=True, network_mode="none", user="1000",
                environment={"HOME": "/tmp/grader-home", "PYTHONUNBUFFERED": "1", **environment}, working_dir="/tmp",
                nano_cpus=int(self.limits.cpu * 1e9), mem_limit=self.limits.memory, pids_limit=self.limits.pids,
                shm_size="256m", cap_drop=["ALL"], security_opt=["no-new-privileges"],
                labels={ROOM_LABEL: self.room_id, ROLE_LABEL: "grader"})
            try:
                status = container.wait(timeout=self.limits.timeout_s)
            except requests.exceptions.RequestException:
                return {}, f"it took longer than {self.limits.timeout_s:.0f} s and was stopped"
            logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
        except docker.errors.ImageNotFound:
            return {}, f"the image {self.image} is missing; build it with `labkit room up`"
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            return {}, f"the Docker engine refused the container: {exc}"
        finally:
            if container is not None:
                try:
                    container.remove(force=True, v=True)
                except (docker.errors.DockerException, requests.exceptions.RequestException):
                    pass  # already gone; the room's sweep (by label) removes what is left
        lines = [line for line in logs.splitlines() if line.startswith(RESULT_MARK)]
        if not lines:
            tail = " | ".join(logs.strip().splitlines()[-3:]) or "no output"
            return {}, f"exit code {status.get('StatusCode')}, {tail}"
        try:
            return json.loads(lines[-1][len(RESULT_MARK):]), ""
        except ValueError:
            return {}, "its result line was cut short"


def _context_files() -> dict[str, bytes]:
    """labkit's package (solutions included, links followed) and the pristine notebooks, by path in the image."""
    import labkit

    package = Path(labkit.__file__).resolve().parent
    notebooks = package.parent / "notebooks"
    if not notebooks.is_dir():
        raise SetupError(f"The grader image needs labkit's notebooks beside the package ({notebooks}); build it "
                         "from a checkout of labkit.", missing=str(notebooks), reason="not a checkout")
    files = {}
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[f"labkit/{path.relative_to(package)}"] = path.read_bytes()
    for path in sorted(notebooks.glob(NOTEBOOKS)):
        files[f"notebooks/{path.name}"] = path.read_bytes()
    return files


def build_image(client: Any, base: str = PARTICIPANT_IMAGE, tag: str = GRADER_IMAGE) -> str:
    """Build the grader image FROM the participant image ``base``, unless one of this recipe exists. Returns its id."""
    try:
        base_id = client.images.get(base).id
    except docker.errors.ImageNotFound:
        raise SetupError(f"The grader is built from the participant image {base}, which is missing; build "
                         "it first (`labkit room up` does).", missing=base, reason="not built") from None
    files = _context_files()
    digest = hashlib.sha256(base_id.encode())
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    recipe = digest.hexdigest()
    try:
        current = client.images.get(tag)
        if current.labels.get(RECIPE_LABEL) == recipe:
            return current.id
    except docker.errors.ImageNotFound:
        pass
    for same in client.images.list(filters={"label": f"{RECIPE_LABEL}={recipe}"}):
        same.tag(tag)  # built before under another name: the same image
        return same.id
    dockerfile = (f"FROM {base}\nCOPY labkit {HOME_IN_IMAGE}/labkit\nCOPY notebooks {HOME_IN_IMAGE}/notebooks\n"
                  f"ENV PYTHONPATH={HOME_IN_IMAGE} PYTHONDONTWRITEBYTECODE=1\n")
    files["Dockerfile"] = dockerfile.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    try:
        image, _ = client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True,
                                       labels={RECIPE_LABEL: recipe})
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise EngineError(f"Building the grader image {tag} failed: {exc}. Check that {base} runs python3 "
                          "with labkit's requirements.", status_code=getattr(exc, "status_code", 0) or 0) from None
    return image.id


# The inside half: runs in the grader container, on a participant's notebook.

def judge_inside(notebook: Path, pristine: Path | None = None) -> dict[str, Any]:
    """Judge a saved notebook file: its exercise cells, as ``judge_cells`` does."""
    try:
        cells = exercise_cells(json.loads(notebook.read_text()))
    except (OSError, ValueError) as exc:
        return {"notebook": notebook.name, "results": [], "error": f"cannot read {notebook} ({exc})",
                "network": _interfaces()}
    return judge_cells(notebook.name, cells, pristine)


def judge_cells(name: str, cells: dict[str, str], pristine: Path | None = None) -> dict[str, Any]:
    """Run the participant's exercise ``cells`` in the pristine notebook ``name`` (labkit's own, from
    ``pristine``) and return the verdicts, each saying whether its cell was started."""
    import nbformat

    from ..workshop import exercise_of, run_notebook

    template = (pristine or Path(HOME_IN_IMAGE) / "notebooks") / Path(name).name
    if not template.exists():
        return {"notebook": name, "results": [], "error": f"no notebook {Path(name).name} ships with labkit",
                "network": _interfaces()}
    refused = {e: why for e, source in cells.items() if (why := refusal(e, source))}
    work = Path(tempfile.mkdtemp(prefix="labkit-grader-"))
    try:
        nb = nbformat.read(template, as_version=4)
        for cell in nb.cells:
            exercise = exercise_of(cell)
            if exercise in refused and exercise in REGISTRY:  # run the starter instead: the rest still runs
                cell.source = REGISTRY[exercise].starter()
            elif exercise in cells:
                cell.source = cells[exercise]
        started = {e: is_started(e, cells.get(e, "")) for e in (exercise_of(c) for c in nb.cells) if e is not None}
        target = work / Path(name).name
        nbformat.write(nb, target)
        run = run_notebook(target, from_outputs=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = [{**asdict(v), "started": started.get(v.exercise, True)} for v in run.verdicts]
    for result in results:
        if result["exercise"] in refused:
            result.update(passed=False, problem=refused[result["exercise"]], rule="grader-cell")
    return {"notebook": name, "results": results, "stopped": run.stopped, "skipped": run.skipped,
            "network": _interfaces()}


def _interfaces() -> list[str]:
    return sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []


def fit(result: dict[str, Any], limit: int) -> str:
    """``result`` as JSON of at most ``limit`` bytes (Kubernetes keeps 4 KiB of a termination message):
    the verdicts, interfaces and error, with problems and hints cut shorter until it fits."""
    keep = 2000
    while True:
        short = {"notebook": result.get("notebook", ""), "network": result.get("network", []),
                 "error": str(result.get("error", ""))[:keep],
                 "results": [{**r, "problem": str(r.get("problem", ""))[:keep], "hint": str(r.get("hint", ""))[:keep]}
                             for r in result.get("results", [])]}
        text = json.dumps(short)
        if len(text.encode()) <= limit or keep == 0:
            return text
        keep //= 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.room.grader",
                                     description="Judge a saved notebook, or the submission in $" + ENV)
    parser.add_argument("notebook", nargs="?", type=Path, help="a saved notebook file")
    parser.add_argument("--submission", action="store_true", help=f"judge the exercise cells in ${ENV}")
    parser.add_argument("--result-file", type=Path, help="also write the result there, cut to --result-limit bytes")
    parser.add_argument("--result-limit", type=int, default=4096)
    args = parser.parse_args(argv)
    if args.submission == (args.notebook is not None):
        parser.error("give a NOTEBOOK or --submission")
    if args.submission:
        submission = Submission.decode(os.environ.get(ENV, ""))
        result = judge_cells(submission.notebook, submission.cells)
    else:
        result = judge_inside(args.notebook)
    print(RESULT_MARK + json.dumps(result), flush=True)
    if args.result_file is not None:
        args.result_file.write_text(fit(result, args.result_limit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
