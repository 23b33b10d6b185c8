"""The notebook runner: a copy of a lesson notebook executed with a real kernel, as nbval runs it, and the
verdicts of its exercises collected. ``labkit workshop check`` runs whole notebooks with it; the room's grader
(labkit.room.grader.entry) runs a participant's slice of one in its container, reading the verdicts from the
check cells' outputs, which only the kernel writes.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from ..errors import UnknownExerciseError
from .catalogue import OUTPUT_METADATA, REGISTRY, TAG_PREFIX, Exercise, Verdict
from .lesson_time import check_times

CELL_TIMEOUT_S = 600


def exercise_of(cell: nbformat.NotebookNode) -> str | None:
    """The exercise id a cell is tagged with (``exercise:<id>``), or None."""
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith(TAG_PREFIX):
            return tag[len(TAG_PREFIX) :]
    return None


def registered(exercise_id: str, notebook: Path) -> Exercise:
    """The exercise a cell's tag names; UnknownExerciseError (nothing changed) when labkit has none by that id."""
    if exercise_id not in REGISTRY:
        raise UnknownExerciseError(exercise=exercise_id, notebook=str(notebook), known=sorted(REGISTRY))
    return REGISTRY[exercise_id]


@dataclass(frozen=True)
class CellFailure:
    """A cell that raised while ``check`` ran on: ``cell`` counts every cell from 1 (markdown too), as
    JupyterLab's list shows them; ``exercise`` is the id of an exercise cell, else ""."""

    cell: int
    ename: str
    evalue: str
    exercise: str = ""

    def line(self) -> str:
        return f"{self.ename}: {self.evalue}, cell {self.cell}"


@dataclass
class NotebookRun:
    notebook: Path
    verdicts: list[Verdict]
    stopped: str = ""  # why execution stopped early, if it did
    failures: list[CellFailure] = field(default_factory=list)  # cells that raised (the run went on)
    skipped: str = ""  # why the notebook was not run (this machine lacks what it needs), if so
    check_s: dict[str, float] = field(default_factory=dict)  # each check cell's run time, by exercise

    @property
    def passed(self) -> bool:
        return not (self.stopped or self.skipped or self.failures) and all(v.passed for v in self.verdicts)


def _fill_solutions(nb: nbformat.NotebookNode, path: Path) -> None:
    for cell in nb.cells:
        exercise_id = exercise_of(cell)
        if exercise_id is not None:
            cell.source = registered(exercise_id, path).solution()


def _failures(nb: nbformat.NotebookNode) -> list[CellFailure]:
    """The cells whose execution ended in an error, from the outputs nbclient recorded (not those
    tagged ``raises-exception``: a lesson may show an error on purpose)."""
    found = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code" or "raises-exception" in cell.get("metadata", {}).get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                evalue = str(output.get("evalue", "")).strip()
                found.append(
                    CellFailure(
                        number,
                        str(output.get("ename", "Error")),
                        evalue.splitlines()[0] if evalue else "",
                        exercise_of(cell) or "",
                    )
                )
    return found


def _output_verdicts(nb: nbformat.NotebookNode) -> list[Verdict]:
    """The verdicts the check cells (never an exercise cell) displayed, from their outputs' metadata."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code" or exercise_of(cell) is not None:
            continue
        for output in cell.get("outputs", []):
            verdict = output.get("metadata", {}).get(OUTPUT_METADATA)
            if isinstance(verdict, dict):
                found.append(Verdict(**verdict))
    return found


def _with_cell_errors(verdicts: list[Verdict], failures: list[CellFailure]) -> list[Verdict]:
    """An exercise whose own cell raised gets that error as its verdict (the check after it only sees
    the consequence, e.g. a model that is not loaded)."""
    raised = {f.exercise: f for f in failures if f.exercise}
    out = [v for v in verdicts if v.exercise not in raised]
    for exercise_id, failure in raised.items():
        hint = REGISTRY[exercise_id].hint if exercise_id in REGISTRY else ""
        out.append(Verdict(exercise_id, False, f"the exercise cell raised an error ({failure.line()}).", hint))
    return out


def _missing_for(path: Path) -> str:
    """What this machine lacks for the notebook, or "": the Docker lesson needs an engine and the image."""
    if not path.stem.startswith("05_docker"):
        return ""
    from ..docker.cpu_image import lesson_status

    ok, why = lesson_status()
    return "" if ok else why


def run_notebook(
    path: Path, solutions: bool = False, from_outputs: bool = False, kernel: KernelManager | None = None
) -> NotebookRun:
    """Execute a copy of the notebook and collect its checks' verdicts (in the order they ran).
    ``from_outputs``: read them from the check cells' outputs, which only the kernel writes (the room's
    grader), instead of the report file, which a model's own process could write too. ``kernel``: one
    started before the notebook was known (a warm grader's, started in the notebook's folder); the caller
    shuts it down (the grader answers first). A kernel started here is shut down here."""
    nb = nbformat.read(path, as_version=4)
    expected = [e for e in (exercise_of(c) for c in nb.cells) if e is not None]
    if solutions:
        _fill_solutions(nb, path)
    missing = _missing_for(path)
    if missing:  # as nbval does: skip the notebook, and say what to do for its exercises
        return NotebookRun(path, [Verdict(e, False, f"not checked: {missing}.") for e in expected], skipped=missing)
    with tempfile.TemporaryDirectory(prefix="labkit-workshop-") as tmp:
        report = Path(tmp) / "verdicts.jsonl"
        if not from_outputs:  # the kernel, and every process it starts, inherits it
            os.environ["LABKIT_WORKSHOP_REPORT"] = str(report)
        stopped = ""
        # ipc: the kernel talks over local sockets, not TCP ports (and says nothing about encryption)
        own = kernel is None
        kernel = kernel or KernelManager(
            kernel_name="python3", transport="ipc", connection_file=str(Path(tmp) / "kernel.json")
        )
        try:
            # allow_errors: one broken cell must not hide the verdicts of the exercises after it
            NotebookClient(
                nb,
                km=kernel,
                timeout=CELL_TIMEOUT_S,
                allow_errors=True,
                resources={"metadata": {"path": str(path.parent.resolve())}},
            ).execute()
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
            stopped = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        finally:
            os.environ.pop("LABKIT_WORKSHOP_REPORT", None)
            if own and kernel.has_kernel:  # a kernel manager given to nbclient is ours to shut down
                kernel.shutdown_kernel(now=False)
        lines = report.read_text().splitlines() if report.exists() else []
    failures = _failures(nb)
    found = _output_verdicts(nb) if from_outputs else [Verdict(**json.loads(line)) for line in lines]
    verdicts = _with_cell_errors(found, failures)
    seen = {v.exercise for v in verdicts}
    for missing in (e for e in expected if e not in seen):
        verdicts.append(
            Verdict(
                missing,
                False,
                f"not checked: the notebook stopped before its check ({stopped or 'no check cell ran'}).",
                "run the notebook top to bottom in JupyterLab to see the failing cell.",
            )
        )
    return NotebookRun(path, verdicts, stopped, failures, check_s=check_times(nb.cells))
