"""Exercises and `labkit workshop`: checks against a real Triton, and the shipped notebooks run both ways."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import nbformat
import pytest

import labkit
import labkit.errors
import labkit.server
from labkit import exercises
from labkit.course import lesson_time, notebook_runner, workshop
from labkit.course.exercises import REGISTRY
from labkit.native import triton_sources

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _body(cell: str) -> str:
    """A %%triton_python cell's model.py (the magic line dropped)."""
    return cell.split("\n", 1)[1]


def test_every_exercise_has_a_starter_a_solution_and_a_tagged_cell():
    tagged = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if notebook_runner.exercise_of(cell):
                tagged[notebook_runner.exercise_of(cell)] = (path.stem, cell.source)
    assert set(tagged) == set(REGISTRY)
    for exercise_id, item in REGISTRY.items():
        notebook, source = tagged[exercise_id]
        assert notebook == item.notebook
        assert source.strip() == item.starter().strip(), f"{exercise_id}: the notebook's cell differs from its starter"
        assert item.solution().strip() != item.starter().strip()
    per_notebook = {}
    for item in REGISTRY.values():
        per_notebook[item.notebook] = per_notebook.get(item.notebook, 0) + 1
    assert all(n >= 1 for n in per_notebook.values()), per_notebook  # a lesson may hold one (02, 05, 14)


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as server:
        server.start()
        server.repository.write_config(
            labkit.model_config(
                "compare",
                "python",
                [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])],
                [("DOT", "FP32", [1]), ("ABOVE", "INT32", [1])],
                max_batch_size=8,
                dynamic_batching={"max_queue_delay_microseconds": 20000},
            )
        )
        yield server


def test_a_wrong_answer_gets_what_is_wrong_and_a_hint(lab):
    wrong = _body(REGISTRY["01-output2"].solution()).replace("a > b", "a >= b")
    lab.python_model("compare", wrong)
    verdict = exercises.check("01-output2", lab)
    assert not verdict.passed and verdict.rule == "above"
    line = repr(verdict)
    assert line.startswith("not yet: 01-output2: ABOVE was") and "that counts the ties" in line
    assert "Hint: ABOVE counts" in line and "\n" not in line and "Traceback" not in line


def test_a_right_answer_written_differently_passes(lab):
    different = _body(REGISTRY["01-output2"].solution()).replace(
        "np.sum(a * b, axis=1, keepdims=True)", 'np.einsum("ij,ij->i", b, a)[:, np.newaxis]'
    )
    assert different != _body(REGISTRY["01-output2"].solution())
    lab.python_model("compare", different)
    assert exercises.check("01-output2", lab).passed


def test_failures_of_the_persons_code_are_one_line_verdicts_too(lab):
    lab.python_model(
        "compare",
        _body(REGISTRY["01-output2"].solution()).replace(
            "responses = []", "responses = []\n        raise ValueError('oops in execute')"
        ),
    )
    verdict = exercises.check("01-output2", lab)
    assert not verdict.passed and "oops in execute" in verdict.problem and "\n" not in repr(verdict)
    missing = exercises.check("09-fourth-power", lab)  # nothing of notebook 09 was set up here
    assert not missing.passed and "'fourth_power' is not loaded" in missing.problem


def test_reset_restores_the_starters_and_keeps_a_backup(tmp_path):
    copy = tmp_path / "06_python_based_backend.ipynb"
    copy.write_text((NOTEBOOKS / copy.name).read_text())
    nb = nbformat.read(copy, as_version=4)
    edited = [c for c in nb.cells if notebook_runner.exercise_of(c)]
    for cell in edited:
        cell.source = "# my work in progress"
    nbformat.write(nb, copy)
    assert workshop.main(["reset", "06", "--dir", str(tmp_path)]) == 0
    restored = nbformat.read(copy, as_version=4)
    for cell in (c for c in restored.cells if notebook_runner.exercise_of(c)):
        assert cell.source == REGISTRY[notebook_runner.exercise_of(cell)].starter() and cell.outputs == []
    (backup,) = (tmp_path / workshop.BACKUP_FOLDER).glob("06_python_based_backend.*.bak.ipynb")
    assert "# my work in progress" in backup.read_text()
    # the backup is not a notebook that check runs, nor a second match for "06"
    assert workshop.find_notebooks([], tmp_path) == [copy]
    assert workshop.find_notebooks(["06"], tmp_path) == [copy]


def _tagged(source: str, exercise_id: str | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    if exercise_id:
        cell.metadata["tags"] = [f"exercise:{exercise_id}"]
    return cell


def test_an_unknown_exercise_tag_is_a_labkit_error_and_changes_nothing(tmp_path):
    path = tmp_path / "01_mine.ipynb"
    nb = nbformat.v4.new_notebook(cells=[_tagged("x = 1", "01-output2"), _tagged("y = 2", "01-nosuch")])
    nbformat.write(nb, path)
    before = path.read_text()
    with pytest.raises(labkit.errors.UnknownExerciseError) as reset:
        workshop.main(["reset", "01", "--dir", str(tmp_path)])
    assert reset.value.exercise == "01-nosuch" and reset.value.notebook == str(path)
    assert "01-output2" in reset.value.known and "01-nosuch" not in reset.value.known
    assert path.read_text() == before and not (tmp_path / workshop.BACKUP_FOLDER).exists()
    with pytest.raises(labkit.errors.UnknownExerciseError) as solutions:
        notebook_runner.run_notebook(path, solutions=True)
    assert solutions.value.exercise == "01-nosuch"


def test_check_works_from_inside_the_notebooks_folder(tmp_path):
    """`make lab` opens JupyterLab in notebooks/: a terminal there runs `labkit workshop check 01`."""
    nbformat.write(nbformat.v4.new_notebook(cells=[_tagged("print('hello')")]), tmp_path / "01_tiny.ipynb")
    run = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "workshop", "check", "01"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("01_tiny:") and "(no exercises)" in run.stdout
    assert workshop.default_folder(tmp_path) == tmp_path
    assert workshop.default_folder(NOTEBOOKS.parent) == NOTEBOOKS


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_broken_exercise_cell_does_not_hide_the_other_verdicts(tmp_path):
    copy = tmp_path / "01_python_backend.ipynb"
    nb = nbformat.read(NOTEBOOKS / copy.name, as_version=4)
    # the start and %load_ext cells, then the exercises' section to the end: the earlier lessons' cells
    # are not what this test is about
    first = next(i for i, c in enumerate(nb.cells) if notebook_runner.exercise_of(c) == "01-output2") - 1
    nb.cells = [
        c for c in nb.cells[:first] if "labkit.start()" in c.source or c.source.startswith("%load_ext")
    ] + nb.cells[first:]
    numbers = {}
    for number, cell in enumerate(nb.cells, 1):
        if notebook_runner.exercise_of(cell) == "01-output2":
            cell.source = "raise ValueError('half-finished')"
            numbers["broken"] = number
        elif notebook_runner.exercise_of(cell) == "01-bad-request":
            cell.source = REGISTRY["01-bad-request"].solution()
    nbformat.write(nb, copy)
    run = notebook_runner.run_notebook(copy)
    assert run.stopped == "" and not run.passed
    assert run.failures == [notebook_runner.CellFailure(numbers["broken"], "ValueError", "half-finished", "01-output2")]
    verdicts = {v.exercise: v for v in run.verdicts}
    assert set(verdicts) == {"01-output2", "01-bad-request"}
    assert verdicts["01-bad-request"].passed
    broken = verdicts["01-output2"]
    assert not broken.passed and broken.hint == REGISTRY["01-output2"].hint
    assert f"(ValueError: half-finished, cell {numbers['broken']})" in broken.line()


def _workshop(*args: str, folder: Path = NOTEBOOKS) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    pinned = NOTEBOOKS.parent.parent / "shared" / "triton-r23.12"  # what notebook 08 finds from notebooks/
    if pinned.is_dir():
        env.setdefault(triton_sources.ENV, str(pinned))
    return subprocess.run(
        [sys.executable, "-m", "labkit.cli", "workshop", "check", *args, "--dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=3000,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_with_the_solutions_every_exercise_passes_and_its_check_time_is_recorded(tmp_path):
    """Run on copies with --record-times: the copies gain each check's time with its answer, and nothing else."""
    folder = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, folder, ignore=shutil.ignore_patterns(".*"))
    run = _workshop("--all", "--solutions", "--record-times", folder=folder)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith(("passed:", "not yet:"))]
    assert sorted(line.split(": ", 1)[1] for line in lines) == sorted(REGISTRY)
    assert all(line.startswith("passed:") for line in lines)
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        original, recorded = (nbformat.read(p, as_version=4) for p in (NOTEBOOKS / path.name, path))
        times = recorded.metadata["labkit"].pop(lesson_time.CHECK_TIMES, {})
        original.metadata["labkit"].pop(lesson_time.CHECK_TIMES, None)
        assert set(times) == {e.id for e in REGISTRY.values() if e.notebook == path.stem}, path.name
        assert all(seconds >= 0 for seconds in times.values()), (path.name, times)  # 0.0: under 50 ms
        assert recorded == original, f"{path.name}: --record-times changed more than labkit.check_s"


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_as_shipped_every_exercise_is_not_yet_with_a_hint():
    run = _workshop("--all")
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith(("passed:", "not yet:"))]
    assert sorted(line.split(": ")[1] for line in lines) == sorted(REGISTRY)
    for line in lines:
        assert line.startswith("not yet:") and " Hint: " in line, line
    assert "stopped early" not in run.stdout


def test_without_the_image_the_docker_lesson_is_skipped_saying_how_to_build_it(tmp_path):
    """An engine runs here; an image tag that is not built stands for a machine that never ran `labkit image build`."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # in CI the lesson must run, never skip
    env["LABKIT_CPU_IMAGE"] = "labkit/tritonserver:never-built"
    report = tmp_path / "nbval.xml"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            "--nbval-current-env",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            str(NOTEBOOKS / "05_docker.ipynb"),
        ],
        cwd=NOTEBOOKS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    cases = ElementTree.parse(report).getroot().iter("testcase")
    skips = [case.find("skipped") for case in cases]
    assert skips and all(s is not None for s in skips)
    assert {s.get("message").removeprefix("Skipped: ") for s in skips} == {
        "the image labkit/tritonserver:never-built is not built; build the image: `labkit image build`"
    }
    # `labkit workshop check 05` says the same for each of the lesson's exercises, and runs nothing
    check = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "workshop", "check", "05", "--dir", str(NOTEBOOKS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 1
    lines = [line.strip() for line in check.stdout.splitlines()]
    assert sorted(line.split(": ")[1] for line in lines if line.startswith("not yet:")) == ["05-scale-file"]
    assert (
        "skipped: the image labkit/tritonserver:never-built is not built; build the image: `labkit image build`"
        in lines
    )
