"""What the grader runs of a notebook (labkit.room.grader.slices), what the scanner reports of the volumes
(labkit.room.board.scanner), and which saved cells the board judges again (progress digests): pure functions
on real files, no engine."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from labkit.course.exercises import REGISTRY
from labkit.room.board import progress, scanner
from labkit.room.grader import slices
from labkit.room.protocol import RoomVerdict

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _notebook() -> nbformat.NotebookNode:
    code, md = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell
    return nbformat.v4.new_notebook(
        cells=[
            md("# Title"),
            code("lab = start()", metadata={"tags": ["grader-setup"]}),  # 1
            md("## 1. A lesson"),
            code("measure(lab)"),  # 3
            code("model_a()", metadata={"tags": ["grader-setup:ex-b"]}),  # 4
            md("## 2. Your turn"),
            code("write_config()"),  # 6
            code("cell a", metadata={"tags": ["exercise:ex-a"]}),  # 7
            code("check('ex-a')"),  # 8
            md("### Another"),
            code("cell b", metadata={"tags": ["exercise:ex-b"]}),  # 10
            code("check('ex-b')"),  # 11
            code("plot()"),  # 12
        ]
    )


def test_a_slice_holds_the_setup_the_section_before_the_exercise_its_cell_and_its_check():
    nb = _notebook()
    assert slices.cells_for(nb.cells, ["ex-a"]) == [1, 6, 7, 8]
    assert slices.cells_for(nb.cells, ["ex-b"]) == [1, 4, 10, 11]  # its own setup tag; no lesson cell
    assert slices.cells_for(nb.cells, ["ex-b", "ex-a", "unknown"]) == [1, 4, 6, 7, 8, 10, 11]
    assert [c.source for c in slices.sliced(nb, ["ex-a"]).cells] == [
        "lab = start()",
        "write_config()",
        "cell a",
        "check('ex-a')",
    ]
    assert len(nb.cells) == 13  # the notebook itself is not changed


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_every_exercise_of_the_workshop_has_its_check_and_the_setup_in_its_slice(path):
    nb = nbformat.read(path, as_version=4)
    where = slices.exercise_index(nb.cells)
    for exercise, at in where.items():
        assert exercise in REGISTRY
        kept = slices.cells_for(nb.cells, [exercise])
        assert at in kept and at + 1 in kept and f'check("{exercise}"' in nb.cells[at + 1].source
        assert kept[0] == next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")  # the lab starts first
        assert len(kept) < len([c for c in nb.cells if c.cell_type == "code"])  # never the whole notebook


def _save(path: Path, cells: dict[str, str]) -> None:
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(s, metadata={"tags": [f"exercise:{e}"]}) for e, s in cells.items()]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def test_the_scanner_finds_each_saved_notebook_and_reads_only_the_changed_ones(tmp_path):
    starters = {e: REGISTRY[e].starter() for e in ("01-output2", "01-bad-request")}
    _save(tmp_path / "p01" / "01_python_backend.ipynb", starters)
    _save(tmp_path / "p02" / "copy" / "01_python_backend.ipynb", {**starters, "01-output2": "solved"})
    _save(tmp_path / "p02" / ".hidden" / "01_python_backend.ipynb", starters)
    (tmp_path / "p02" / "notes.ipynb").write_text("{}")
    (tmp_path / "p03").mkdir()
    (tmp_path / "p03" / "02_cpp_backends.ipynb").write_text("{half written")
    known: dict = {}
    found = scanner.scan(tmp_path, known)
    assert {u: {p: same for p, (_, same) in row.items()} for u, row in found.items()} == {
        "p01": {"01_python_backend.ipynb": True},
        "p02": {"copy/01_python_backend.ipynb": False},
        "p03": {"02_cpp_backends.ipynb": False},
    }  # unreadable: judged (and again at its next save)
    assert len(known) == 3
    assert scanner.scan(tmp_path, known) == found and len(known) == 3  # nothing changed: nothing read again


def test_the_board_judges_again_only_the_cells_that_changed_since_their_verdict():
    table = progress.Progress(["p01"])
    starter, solved = REGISTRY["01-output2"].starter(), REGISTRY["01-output2"].solution()
    cells = {"01-output2": solved, "01-bad-request": REGISTRY["01-bad-request"].starter()}
    changed = table.changed("p01", cells)
    assert list(changed) == ["01-output2"]  # a starter is never judged
    table.record(
        "p01", "01_python_backend.ipynb", 1.0, [RoomVerdict("01-output2", passed=True, digest=changed["01-output2"])]
    )
    assert table.changed("p01", cells) == {}
    assert table.changed("p01", {**cells, "01-output2": solved + "\n\n"}) == {}  # the same code, saved again
    assert list(table.changed("p01", {**cells, "01-output2": solved + "# edited"})) == ["01-output2"]
    assert table.changed("p01", {"01-output2": starter}) == {}
    again = progress.Progress.from_json(json.loads(json.dumps(table.to_json())))
    assert again.mark("p01", "01-output2").digest == changed["01-output2"]
