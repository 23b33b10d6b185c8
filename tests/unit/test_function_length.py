"""No function in labkit/ is over MAX_FUNCTION_LINES lines, except a config literal or an argparse table
named in ALLOWED: a longer function is split into steps with names of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import labkit

PACKAGE = Path(labkit.__file__).resolve().parent
MAX_FUNCTION_LINES = 80
#: (file under labkit/, function) that may be longer: data laid out as code, one entry a line.
ALLOWED = {
    ("room/hub/hubconfig.py", "_one_machine"),  # the hub's configuration, a literal
    ("room/commands.py", "register"),  # `labkit room`'s argparse table
}


def _long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in ``source`` longer than ``limit`` lines, its
    decorators included; nested functions count inside the one that holds them and on their own."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - first + 1
            if lines > limit:
                found.append((node.name, lines))
    return found


def test_the_check_sees_a_long_function_and_its_decorators():
    body = "".join(f"    x{i} = {i}\n" for i in range(3))
    assert _long_functions(f"def f():\n{body}", limit=4) == []
    assert _long_functions(f"@staticmethod\ndef f():\n{body}", limit=4) == [("f", 5)]
    method = "class C:\n    async def g(self):\n" + "".join(f"        y{i} = {i}\n" for i in range(3))
    assert _long_functions(method, limit=3) == [("g", 4)]


def test_no_function_in_labkit_is_over_the_limit():
    files = [p for p in PACKAGE.rglob("*.py") if "model_repository" not in p.relative_to(PACKAGE).parts]
    assert len(files) > 100
    too_long = {
        (path.relative_to(PACKAGE).as_posix(), name): lines
        for path in files
        for name, lines in _long_functions(path.read_text())
    }
    assert {key: lines for key, lines in too_long.items() if key not in ALLOWED} == {}
    # the exceptions name functions that exist
    for file, name in ALLOWED:
        tree = ast.parse((PACKAGE / file).read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == name for n in ast.walk(tree)), (file, name)
