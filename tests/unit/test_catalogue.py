"""The exercise catalogue and what stands on it: each exercise's metadata is data at the bottom of the course,
each check registers against its id, the room reads the catalogue alone (the grader's entry, which runs
notebooks, aside), ``import labkit`` loads its names on first use, and every process of the board stays small:
at most 40 labkit modules, none of the server, the clients, the traffic or the plots."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

import labkit
from labkit.course import catalogue
from labkit.course.exercises import CHECKS, REGISTRY, exercise
from labkit.errors import OptionError
from labkit.room.protocol import RoomVerdict, Submission, not_started

PACKAGE = Path(labkit.__file__).resolve().parent
#: The modules the hub (and the board itself) start with ``python -m``: the board's processes.
BOARD_PROCESSES = ("labkit.room.board.service", "labkit.room.board.scanner")
HEAVY_WINGS = ("server", "client", "traffic", "observe")
MAX_BOARD_MODULES = 40


def _imported(path: Path) -> set[str]:
    """The absolute names of the labkit modules (or packages) ``path`` imports anywhere in its text."""
    module = ".".join(["labkit", *path.relative_to(PACKAGE).with_suffix("").parts])
    package = module.rpartition(".")[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("labkit")}
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            if source.startswith("labkit"):
                found.add(source)
    return found


def _loaded_by(module: str) -> list[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(m for m in sys.modules if m.startswith('labkit'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_every_exercise_of_the_catalogue_has_one_check_and_every_check_an_exercise():
    assert REGISTRY is catalogue.REGISTRY and len(REGISTRY) >= 20
    assert set(CHECKS) == set(REGISTRY)
    assert all(e.starter().strip() and e.solution().strip() for e in REGISTRY.values())
    for id in ("99-nowhere", "01-output2"):  # not in the catalogue; registered already
        with pytest.raises(OptionError) as refused:
            exercise(id)(lambda server: None)
        assert (refused.value.option, refused.value.value) == ("id", id) and isinstance(refused.value, ValueError)
    assert "99-nowhere" not in CHECKS


def test_the_catalogue_imports_no_other_labkit_module():
    assert _imported(PACKAGE / "course" / "catalogue.py") <= {"labkit.errors"}


def test_the_room_reads_only_the_catalogue_of_the_course():
    """The grader's entry runs notebooks (labkit.course.notebook_runner): the one exception."""
    reaching = {
        str(path.relative_to(PACKAGE)): sorted(
            m for m in _imported(path) if m.startswith("labkit.course") and m != "labkit.course.catalogue"
        )
        for path in (PACKAGE / "room").rglob("*.py")
    }
    assert {p: m for p, m in reaching.items() if m} == {"room/grader/entry.py": ["labkit.course.notebook_runner"]}


def test_each_room_rule_lives_in_one_module():
    board = PACKAGE / "room" / "board"
    # the queue does not depend on the page, nor the board's sources on the grader's modules
    assert "labkit.room.board.page" not in _imported(board / "watch.py")
    assert not any(m.startswith("labkit.room.grader") for m in _imported(board / "notebook_sources.py"))
    assert not any(m.startswith("labkit.room.grader") for m in _imported(board / "scanner.py"))
    # a RoomVerdict is a Verdict with what the room adds, not its fields declared again
    assert issubclass(RoomVerdict, catalogue.Verdict)
    own = {f.name for f in fields(RoomVerdict)} - {f.name for f in fields(catalogue.Verdict)}
    assert own == {"started", "digest"} and set(RoomVerdict.__annotations__) == own
    defined: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            for name in names:
                defined.setdefault(name, []).append(str(path.relative_to(PACKAGE)))
    for name in ("is_started", "remove_containers", "NOTEBOOKS", "ENVIRONMENT_PACKAGES", "PageState"):
        assert len(defined[name]) == 1, (name, defined[name])


def test_started_or_untouched_is_one_rule():
    started, shipped = "x = 1  # mine", REGISTRY["03-delay"].starter()
    cells = {"03-delay": shipped, "03-preferred": started}
    assert [r.exercise for r in not_started("03_dynamic_batching.ipynb", cells)] == ["03-delay"]
    assert not_started("03_dynamic_batching", {}) == []
    assert Submission("p01", "03_dynamic_batching.ipynb", {"03-delay": shipped}).untouched
    assert not Submission("p01", "03_dynamic_batching.ipynb", cells).untouched


def test_importing_labkit_loads_its_names_on_first_use():
    loaded = _loaded_by("labkit")
    assert not [m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in HEAVY_WINGS], loaded
    assert callable(labkit.start) and labkit.exercises.check is labkit.course.exercises.check
    assert "load_ipython_extension" in vars(labkit)


@pytest.mark.parametrize("module", BOARD_PROCESSES)
def test_every_process_of_the_board_loads_few_labkit_modules_and_no_heavy_wing(module):
    loaded = _loaded_by(module)
    assert module in loaded
    assert [m for m in loaded if any(m == f"labkit.{w}" or m.startswith(f"labkit.{w}.") for w in HEAVY_WINGS)] == []
    assert len(loaded) <= MAX_BOARD_MODULES, loaded


def test_a_check_imports_its_own_notebooks_module_and_finds_one_kept_elsewhere():
    import importlib
    import pkgutil
    import subprocess
    import sys

    import labkit.course.exercises as package
    from labkit.course.exercises.core import MODULES

    found = {m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("nb")}
    assert set(MODULES) == found  # a new notebook's module is named, or its checks are never found
    code = (
        "import sys\nfrom labkit.course.exercises.core import checks_of\n"
        "assert '14-scale' in checks_of('14-scale')\n"  # kept in nb02's module
        "checks_of('01-output2')\n"
        "print(sorted(m for m in sys.modules if m.startswith('labkit.course.exercises.nb')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "nb02" in out and "nb17" in out  # "14-scale" looked everywhere once nb14 held nothing
    lazy = subprocess.run(
        [sys.executable, "-c", code.replace("assert '14-scale' in checks_of('14-scale')\n", "")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert lazy.strip() == "['labkit.course.exercises.nb01']"
    assert importlib.import_module("labkit.exercises").nb12.__name__ == "labkit.course.exercises.nb12"
