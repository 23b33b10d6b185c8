"""The grader's inside half: runs in the grader container, on one participant's notebook.

    python -m labkit.room.grader.entry --submission [--result-file F]   # the Submission in $LABKIT_SUBMISSION
    python -m labkit.room.grader.entry --warm DIR   # the same, started before its submission arrives in DIR
    python -m labkit.room.grader.entry --submission-file F   # the Submission in a file (a Swarm config)

The exercise cells are put into the pristine notebook, which runs with a real kernel and a real Triton as
``labkit workshop check`` does; the verdicts come back as one JSON line after RESULT_MARK (and, on
Kubernetes, as the termination message), with ``cpu_s``: the core-seconds the container has used so far (its
own cgroup's counter: its start, its warm-up and the judging; absent when unreadable), which is what the run
costs wherever it ran (a swarm's worker, a cluster's node). The board's side is labkit.room.grader.runner.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...course.catalogue import REGISTRY, is_started
from ...plumbing.polling import wait_until
from ..cpu_cost import own_cpu_s
from ..protocol import (
    ENV,
    READY_FILE,
    RESULT_MARK,
    SUBMISSION_FILE,
    WARM_MARK,
    RoomVerdict,
    Submission,
    not_started,
)
from . import slices
from .image import HOME_IN_IMAGE
from .vetting import refusal

WARM_POLL_S = 0.2


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
    judge an exercise run (labkit.room.grader.slices): those of ``judge``, else every started exercise; a cell
    still as shipped is "not started" without running. ``kernel``: a kernel already started in ``work``."""
    import nbformat

    from ...course.notebook_runner import exercise_of, run_notebook

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
    results = not_started(name, cells)
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
            **({"cpu_s": result["cpu_s"]} if "cpu_s" in result else {}),
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
    # a look every 0.2 s: each costs the same, and at 0.05 s a waiting grader spent 4.6 ms of CPU a second
    # (0.3 core-s a minute), more than its kernel; the verdict comes 0.075 s later on average
    wait_until(lambda: (inbox / READY_FILE).exists(), 10**9, "a submission", interval_s=WARM_POLL_S)
    return Submission.decode((inbox / SUBMISSION_FILE).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit.room.grader.entry",
        description="Judge the submission in $" + ENV + " or, with --warm, in a folder",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--submission", action="store_true", help=f"judge the exercise cells in ${ENV}")
    mode.add_argument("--submission-file", type=Path, metavar="F", help="judge the submission in file F")
    mode.add_argument("--warm", type=Path, metavar="DIR", help="start a kernel, then wait for a submission in DIR")
    parser.add_argument("--result-file", type=Path, help="also write the result there, cut to --result-limit bytes")
    parser.add_argument("--result-limit", type=int, default=4096)
    args = parser.parse_args(argv)
    # nbformat validates with jsonschema, which builds a Lark grammar for RFC 3987 as it is imported when the
    # optional rfc3987_syntax is installed (it is, in the participant image): 0.6 core-seconds of every grader
    # run, for a format check that nbformat's schema never makes. None in sys.modules makes that optional import
    # fail at once, in this process only (nothing here has imported jsonschema yet; the kernel never does).
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
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
    elif args.submission_file:
        submission = Submission.decode(args.submission_file.read_text())
    else:
        submission = Submission.decode(os.environ.get(ENV, ""))
    result = judge_cells(submission.notebook, submission.cells, judge=submission.judge, kernel=kernel, work=work)
    cpu_s = own_cpu_s()  # last: what the kernel and Triton spent judging is in it
    if cpu_s is not None:
        result["cpu_s"] = cpu_s
    print(RESULT_MARK + json.dumps(result), flush=True)
    if args.result_file is not None:
        args.result_file.write_text(fit(result, args.result_limit))
    if kernel is not None and kernel.has_kernel:  # after the answer: the board stops the container anyway
        kernel.shutdown_kernel(now=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
