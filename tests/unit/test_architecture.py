"""The shape of the package: no import cycles (imports inside functions count), small files (Python
and C++, in labkit/ and tests/), one meaning per class name, a thin server facade, and every error a
public call raises importable from ``labkit.errors``; a small, sorted public API; few flat modules, no
file name twice, and every package described in the README's layout and docs/architecture.md."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import labkit

PACKAGE = Path(labkit.__file__).resolve().parent
ROOT = PACKAGE.parent
MAX_LINES = 500  # ruff format lays a call out one argument a line: the cap that was 400 before it
SOURCE_SUFFIXES = {".py", ".cc", ".cpp", ".h", ".hpp"}
#: Triton r23.12's own C API headers (core's include/triton/core). labkit's declarations of them keep
#: Triton's file names and scope, so that a build switches to Triton's headers by the -I folder alone; a
#: header that stands for one of these is as long as Triton's API and is exempt from MAX_LINES.
#: tests/test_header_abi.py checks each against Triton's (names, and every type and value).
TRITON_HEADERS = {"tritonbackend.h", "tritoncache.h", "tritonrepoagent.h", "tritonserver.h"}
#: Names that stand for one thing each by Triton's own convention, not labkit's classes.
SHARED_NAMES = {"TritonPythonModel"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "model_repository" in path.relative_to(PACKAGE).parts:
            continue  # Triton models, not labkit code
        parts = ["labkit", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """labkit modules that ``name`` imports anywhere in its text (functions and `if` blocks too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = node.module or ""
            source = (f"{base}.{module}" if module else base) if node.level else module
            submodules = {f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules}
            targets |= submodules  # `from pkg import submodule` needs the submodule, not pkg's own names
            if len(submodules) < len(node.names):
                targets.add(source)
    return {t for t in targets if t in modules and t != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph["labkit.server.launchers.docker"] >= {"labkit.server.base", "labkit.docker.engine"}
    assert _cycles(graph) == []


#: The wings from the bottom up: a wing imports only wings on a lower line (imports inside functions count);
#: wings on one line import nothing of each other.
#: A flat module of labkit/ is a wing of its own; ``labkit`` is the package's ``__init__``, the notebook's API.
LAYERS = (
    ("errors",),
    ("plumbing", "stub_side"),
    ("repository",),
    ("gpu", "native"),  # neither imports the other: builds ask plumbing.gpu_probe whether a GPU is visible
    ("docker",),
    ("python_envs",),
    ("stuck",),
    ("server",),
    ("breakpoints",),
    ("client",),
    ("traffic",),
    ("observe",),
    ("course",),
    ("room", "lessons", "exercises"),
    ("magics", "_cells"),
    ("_start", "pytest_plugin"),
    ("cli",),
    ("labkit",),
)
RANK = {wing: rank for rank, wings in enumerate(LAYERS) for wing in wings}


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "labkit"


def _crossings() -> list[tuple[str, str]]:
    """Every (importer, imported) pair of labkit modules in two different wings."""
    modules = _modules()
    return sorted(
        (name, target)
        for name, path in modules.items()
        for target in _imports(name, path, modules)
        if _wing(name) != _wing(target)
    )


def _upward(crossings: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in crossings if RANK[_wing(a)] <= RANK[_wing(b)]]


def test_the_layer_check_sees_an_import_upward_or_sideways():
    down, up = ("labkit.client.inference", "labkit.server.base"), ("labkit.server.control", "labkit.client.waiting")
    sideways = ("labkit.plumbing.ports", "labkit.stub_side")
    assert _upward([down, up, sideways]) == [up, sideways]


def test_every_wing_has_its_layer_and_imports_only_wings_below_it():
    assert sorted({_wing(m) for m in _modules()}) == sorted(RANK)
    assert _upward(_crossings()) == []
    # the bottom wing is shared by most of the house and needs none of it
    assert {_wing(b) for a, b in _crossings() if _wing(a) == "plumbing"} <= {"errors"}


def test_no_wing_imports_another_wings_private_module_and_each_used_wing_names_its_surface():
    private = [(a, b) for a, b in _crossings() if any(p.startswith("_") for p in b.split(".")[2:])]
    assert private == []
    modules = _modules()
    used = {_wing(b) for _, b in _crossings()} - {"labkit"}
    lacking = []
    for wing in sorted(used):
        init = PACKAGE / wing / "__init__.py"
        if not init.exists():
            continue  # a flat module: its names are its surface
        names = next(
            (
                ast.literal_eval(node.value)
                for node in ast.parse(init.read_text()).body
                if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["__all__"]
            ),
            None,
        )
        if names is None:
            lacking.append(wing)
            continue
        defined = {n for n in names if f"labkit.{wing}.{n}" in modules}
        namespace = importlib.import_module(f"labkit.{wing}")
        assert [n for n in names if n not in defined and not hasattr(namespace, n)] == [], wing
    assert lacking == []


def _sources() -> list[Path]:
    """Every Python and C++ file of labkit and of its tests."""
    return [
        p
        for folder in (PACKAGE, ROOT / "tests")
        for p in folder.rglob("*")
        if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts
    ]


def _mirrors_triton(path: Path) -> bool:
    """A header that stands for one of Triton's: its name and folder (triton/core) are Triton's."""
    return path.name in TRITON_HEADERS and path.parent.parts[-2:] == ("triton", "core")


def test_files_stay_small():
    sources = _sources()
    assert any(p.suffix == ".hpp" for p in sources) and any(p.parent.name == "tests" for p in sources)
    assert any(_mirrors_triton(p) for p in sources)  # the exemption names files that exist
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in sources if not _mirrors_triton(p)}
    assert {n: s for n, s in sizes.items() if s > MAX_LINES} == {}


def test_test_modules_have_one_basename_each():
    """pytest imports test modules by basename (no packages): two of one name stop the whole collection."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) > 30 and sorted({n for n in names if names.count(n) > 1}) == []


def _class_names(path: Path) -> list[str]:
    return [node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)]


def test_one_meaning_per_class_name():
    assert _duplicates_of({"a": ["X", "Y"], "b": ["X"]}) == {"X": ["a", "b"]}  # the check itself sees one
    twice = _duplicates_of({name: _class_names(path) for name, path in _modules().items()})
    assert {cls: where for cls, where in twice.items() if cls not in SHARED_NAMES} == {}


def _duplicates_of(classes: dict[str, list[str]]) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for module, names in classes.items():
        for cls in names:
            seen.setdefault(cls, []).append(module)
    return {cls: where for cls, where in seen.items() if len(where) > 1}


def test_the_server_facade_stays_thin():
    from labkit.server.base import TritonServer
    from labkit.server.launchers.embedded import EmbeddedServer

    public = {n for n in dir(TritonServer) if not n.startswith("_")}
    instance_attrs = {"runtime", "health", "models"}  # set in __init__
    assert len(public | instance_attrs) <= 25, sorted(public | instance_attrs)
    assert {n for n in dir(EmbeddedServer) if not n.startswith("_")} == public  # launchers add none


def test_every_raised_error_is_importable_from_labkit_errors():
    raised = set()
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                raised.add(node.exc.func.id)
    ours = {name for name in raised if isinstance(getattr(labkit.errors, name, None), type)}
    assert ours, "the scan found no labkit errors at all"
    assert sorted(ours - set(labkit.errors.__all__)) == []
    for name in ours:
        assert issubclass(getattr(labkit.errors, name), labkit.LabkitError)
    # the ones the notebooks catch are on labkit itself too, the same classes
    assert all(getattr(labkit, n) is getattr(labkit.errors, n) for n in labkit.__all__ if n.endswith("Error"))


def test_the_public_surface_is_what_a_notebook_calls_sorted_and_nothing_leaks():
    import types

    assert labkit.__all__ == sorted(labkit.__all__) and len(labkit.__all__) <= 45
    assert all(hasattr(labkit, name) for name in labkit.__all__)
    public = {n for n, v in vars(labkit).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert sorted(public - set(labkit.__all__)) == ["load_ipython_extension"]  # IPython's hook for %load_ext


#: at most this many modules directly in labkit/; the rest live in packages named for what they hold
MAX_FLAT = 12


def test_the_top_level_keeps_few_modules_and_no_two_modules_share_a_file_name():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT, flat
    names: dict[str, list[str]] = {}
    for name, path in _modules().items():
        if path.name != "__init__.py":
            names.setdefault(path.name, []).append(name)
    assert {n: m for n, m in names.items() if len(m) > 1} == {}
    folders = [
        p.name
        for p in PACKAGE.rglob("*")
        if p.is_dir() and p.name not in ("__pycache__",) and "model_repository" not in p.relative_to(PACKAGE).parts
    ]
    assert sorted({n for n in folders if folders.count(n) > 1}) == []


def _packages() -> list[Path]:
    """Every folder of labkit/ that holds Python code (a package), as a path relative to labkit/."""
    return sorted(
        p.parent.relative_to(PACKAGE)
        for p in PACKAGE.rglob("__init__.py")
        if "model_repository" not in p.relative_to(PACKAGE).parts and p.parent != PACKAGE
    )


def test_the_readme_and_the_architecture_page_describe_every_package():
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("\n## ", 3)] if "\n## " in layout[3:] else layout
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    missing_readme, missing_doc = [], []
    for package in _packages():
        top = package.parts[0]
        if f"`labkit/{package.as_posix()}/`" not in layout and f"`{package.name}/`" not in layout:
            missing_readme.append(package.as_posix())
        if f"{top}/" not in architecture:
            missing_doc.append(top)
    assert (missing_readme, missing_doc) == ([], [])


def test_no_exported_name_shadows_a_submodule():
    """``labkit.perf`` and ``labkit.timeline`` are functions: no module of the same name may hide behind them."""
    submodules = {name.split(".")[1] for name in _modules() if name.count(".") >= 1}
    shadowed = {
        name
        for name in labkit.__all__
        if name in submodules and getattr(labkit, name) is not importlib.import_module(f"labkit.{name}")
    }
    assert shadowed == set()
    assert callable(labkit.perf) and callable(labkit.timeline)
