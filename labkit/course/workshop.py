"""`labkit workshop`: run the notebooks' exercises and say, per exercise, passed or not yet.

    labkit workshop check [NOTEBOOK ...] [--all] [--solutions [--record-times]]
    labkit workshop reset NOTEBOOK ...
    labkit workshop plan [--start HH:MM] [--all] [--explain]

``check`` executes each notebook (a copy; the file is not changed) with a real kernel and collects the
verdict of every check cell; ``--solutions`` first fills each exercise cell with its reference solution, and
``--record-times`` then writes each check cell's run time into the notebook's metadata (``labkit.check_s``, the
only change to the file), which the day's plan counts (labkit.course.lesson_time).
``reset`` puts a participant's notebook back to its starters, keeping a timestamped backup in
``.labkit-backups/`` beside it (out of the notebooks' pattern, so ``check --all`` does not run it).
A cell that raises does not stop ``check``: the notebook runs on, and an exercise cell's error becomes
that exercise's verdict. ``plan`` prints the day's schedule from the notebooks' metadata (labkit.course.schedule).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import nbformat

from ..errors import NotebookNotFoundError, OptionError
from . import schedule
from .lesson_time import CHECK_TIMES
from .notebook_runner import NotebookRun, exercise_of, registered, run_notebook

BACKUP_FOLDER = ".labkit-backups"
_PATTERN = "[0-9][0-9]_*.ipynb"


def default_folder(cwd: Path | None = None) -> Path:
    """Where the notebooks are: ``notebooks/`` under the working directory, or the working directory
    itself when it holds them (``make lab`` opens JupyterLab in ``notebooks/``)."""
    cwd = cwd or Path.cwd()
    if (cwd / "notebooks").is_dir() or not any(cwd.glob(_PATTERN)):
        return cwd / "notebooks"
    return cwd


def find_notebooks(names: list[str], folder: Path) -> list[Path]:
    """Notebooks by path, file name or number prefix ("01"); all of ``folder``'s when ``names`` is empty."""
    every = sorted(folder.glob(_PATTERN))
    if not names:
        return every
    found = []
    for name in names:
        path = Path(name)
        if path.suffix == ".ipynb" and path.exists():
            found.append(path)
            continue
        matches = [p for p in every if p.stem == name or p.stem.startswith(f"{name}_") or p.name == name]
        if len(matches) != 1:
            raise NotebookNotFoundError(
                folder=str(folder), name=name, known=[p.stem for p in every], matches=[p.stem for p in matches]
            )
        found.append(matches[0])
    return found


def record_times(run: NotebookRun) -> None:
    """Write the check cells' run times with the reference answers into the notebook's ``labkit`` metadata,
    and nothing else; a run where an exercise did not pass records nothing (its times are not an answer's)."""
    if not run.passed:
        print("  times not recorded: not every exercise passed", flush=True)
        return
    nb = nbformat.read(run.notebook, as_version=4)
    nb.metadata.setdefault("labkit", {})[CHECK_TIMES] = dict(sorted(run.check_s.items()))
    nbformat.write(nb, run.notebook)
    times = ", ".join(f"{exercise} {seconds:.1f} s" for exercise, seconds in sorted(run.check_s.items()))
    print(f"  recorded in {run.notebook.name}: {times or 'no check cells'}", flush=True)


def check(names: list[str], folder: Path, solutions: bool = False, record: bool = False) -> int:
    """Run the notebooks, print one line per exercise; 0 only when every exercise passed. ``record`` (with
    ``solutions`` only): keep each check cell's run time in the notebook's metadata."""
    if record and not solutions:
        raise OptionError(
            option="--record-times", value=True, valid="only with --solutions (a starter's failing check is no answer)"
        )
    ok = True
    for path in find_notebooks(names, folder):
        print(f"{path.stem}{' (with the reference solutions)' if solutions else ''}:", flush=True)
        t0 = time.monotonic()
        run = run_notebook(path, solutions)
        for verdict in run.verdicts:
            print(f"  {verdict.line()}", flush=True)
        for failure in (f for f in run.failures if not f.exercise):
            print(f"  a cell raised an error ({failure.line()}); the notebook ran on", flush=True)
        if run.stopped:
            print(f"  the notebook stopped early: {run.stopped}", flush=True)
        if run.skipped:
            print(f"  skipped: {run.skipped}", flush=True)
        if not run.verdicts:
            print("  (no exercises)", flush=True)
        print(f"  ({time.monotonic() - t0:.0f} s)", flush=True)
        if record:
            record_times(run)
        ok = ok and run.passed
    return 0 if ok else 1


def reset(names: list[str], folder: Path) -> int:
    """Put exercise cells back to their starters (outputs cleared), after a timestamped backup."""
    if not names:
        raise OptionError(
            option="names", value=names, valid="the notebook(s) to reset, e.g. ['01'] (nothing was changed)"
        )
    for path in find_notebooks(names, folder):
        nb = nbformat.read(path, as_version=4)
        tagged = [(c, exercise_id) for c in nb.cells if (exercise_id := exercise_of(c)) is not None]
        cells = [c for c, _ in tagged]
        starters = [registered(exercise_id, path).starter() for _, exercise_id in tagged]  # all known before a write
        backup = path.parent / BACKUP_FOLDER / f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}.bak.ipynb"
        backup.parent.mkdir(exist_ok=True)
        shutil.copy2(path, backup)
        for cell, starter in zip(cells, starters):
            cell.source = starter
            cell.outputs = []
            cell.execution_count = None
        nbformat.write(nb, path)
        print(
            f"{path}: {len(cells)} exercise cell(s) back to their starters; your version is in "
            f"{backup.relative_to(path.parent)}"
        )
    return 0


def _add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser], folder: Path | None) -> None:
    c = sub.add_parser("check", help="run notebooks and say, per exercise, passed or not yet (with a hint)")
    c.add_argument(
        "notebooks", nargs="*", help="paths, names or number prefixes (01); default with --all: every notebook"
    )
    c.add_argument("--all", action="store_true", help="every notebook in the folder")
    c.add_argument("--solutions", action="store_true", help="fill each exercise with its reference solution first")
    c.add_argument(
        "--record-times",
        action="store_true",
        help="with --solutions: write each check's run time into the notebook's metadata (labkit.check_s)",
    )
    c.set_defaults(usage_error=c.error)
    r = sub.add_parser("reset", help="restore notebooks' exercise cells to their starters (keeps a backup)")
    r.add_argument("notebooks", nargs="+")
    pl = sub.add_parser("plan", help="the day's schedule: the core lessons with their times, breaks and lunch")
    pl.add_argument(
        "--start", default="09:00", type=_time_of_day, help="when the day starts (HH:MM, default %(default)s)"
    )
    pl.add_argument("--all", action="store_true", help="the optional lessons too, in the notebooks' order")
    pl.add_argument("--explain", action="store_true", help="also the rule that gives each lesson's least minutes")
    for p in (c, r, pl):
        p.add_argument(
            "--dir",
            type=Path,
            default=folder or default_folder(),
            help="the notebooks folder (default: ./notebooks, or . when it holds the notebooks)",
        )


def parser(folder: Path | None = None) -> argparse.ArgumentParser:
    """`labkit workshop`'s command line (the site's CLI reference is generated from it)."""
    root = argparse.ArgumentParser(prog="labkit workshop", description=__doc__.split("\n\n")[0])
    _add_commands(root.add_subparsers(dest="workshop_command", required=True), folder)
    return root


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit workshop` and its subcommands to labkit's parser."""
    work = sub.add_parser(
        "workshop",
        help="the notebooks' exercises: `labkit workshop check [NOTEBOOK...|--all] "
        "[--solutions]`, `labkit workshop reset NOTEBOOK` or `labkit workshop plan`",
        description=__doc__.split("\n\n")[0],
    )
    _add_commands(work.add_subparsers(dest="workshop_command", required=True), None)
    work.set_defaults(func=run)


def run(parsed: argparse.Namespace) -> int:
    """Carry out a parsed `labkit workshop` command line."""
    if parsed.workshop_command == "check":
        if not parsed.notebooks and not parsed.all:
            parsed.usage_error("name notebooks or pass --all")
        return check(parsed.notebooks, parsed.dir, parsed.solutions, parsed.record_times)
    if parsed.workshop_command == "plan":
        lessons = schedule.lessons(parsed.dir)
        if not lessons:
            raise NotebookNotFoundError(folder=str(parsed.dir))
        print(schedule.plan(lessons, schedule.day(lessons, start=parsed.start, optional=parsed.all)))
        if parsed.explain:
            print()
            print(schedule.explain(lessons))
        return 0
    return reset(parsed.notebooks, parsed.dir)


def main(args: list[str] | None = None, folder: Path | None = None) -> int:
    return run(parser(folder).parse_args(args))


def _time_of_day(text: str) -> str:
    try:
        schedule.minute_of_day(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


if __name__ == "__main__":
    sys.exit(main())
