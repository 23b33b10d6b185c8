"""Notebooks import only labkit's public API, since learners copy what they import: ``labkit``, the modules
named in ``labkit.__all__``, ``labkit.lessons`` and ``labkit.exercises``. Whatever a lesson needs from deeper
is exported there (``labkit.CPU_IMAGE``, ``labkit.lessons.production``)."""

from __future__ import annotations

import ast
import importlib.util
import json
import types
from pathlib import Path

import pytest

import labkit

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PUBLIC = {
    "labkit",
    "labkit.lessons",
    "labkit.exercises",
    *(f"labkit.{n}" for n in labkit.__all__ if isinstance(getattr(labkit, n), types.ModuleType)),
}


def _python(source: str) -> str:
    """A code cell's Python: IPython's line magics and shell lines (``%...``, ``!...``) left out."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def deep_imports(source: str) -> list[str]:
    """The labkit modules a code cell imports that are not public (a ``%%`` cell magic's body is not Python
    of the notebook: a model's or a backend's source)."""
    if source.lstrip().startswith("%%"):
        return []
    found = []
    for node in ast.walk(ast.parse(_python(source))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append(node.module)
    found += _attribute_modules(ast.parse(_python(source)))
    return [m for m in found if (m == "labkit" or m.startswith("labkit.")) and m not in PUBLIC]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return node.id if isinstance(node, ast.Name) else ""


def _attribute_modules(tree: ast.AST) -> list[str]:
    """Modules reached through attributes (``labkit.repository.config.parse``): the longest prefix of each
    ``labkit.`` chain that is a module, when it is one of labkit's own (a name may also be a function)."""
    found = set()
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        parts = _dotted(node).split(".") if isinstance(node, ast.Attribute) and id(node) not in inner else []
        if parts[:1] != ["labkit"]:
            continue
        for end in range(len(parts), 1, -1):
            name = ".".join(parts[:end])
            try:
                if importlib.util.find_spec(name) is not None:
                    found.add(name)
                    break
            except (ImportError, ValueError):
                continue
    return sorted(found)


def test_the_check_sees_each_kind_of_deep_import_and_skips_magics():
    cell = (
        "%load_ext labkit\n!ls /tmp\nimport labkit\nimport labkit.server.base\n"
        "from labkit.docker.cpu_image import IMAGE\nfrom labkit.plumbing import triton_dist\n"
        "from labkit import reference\nfrom labkit.lessons import bls\nfrom labkit.errors import ConfigError\n"
        "import numpy as np\n"
    )
    assert deep_imports(cell) == ["labkit.server.base", "labkit.docker.cpu_image", "labkit.plumbing"]
    assert deep_imports("%%triton_python add_sub\nfrom labkit.server import base\n") == []
    reached = "import labkit\nlabkit.server.base.x(t)\nlabkit.gpu.probe()\nlabkit.stats.metric(s, 'x')\n"
    assert deep_imports(reached) == ["labkit.server.base"]
    assert {"labkit.errors", "labkit.native", "labkit.gpu"} <= PUBLIC


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_notebook_imports_only_the_public_api(path):
    cells = json.loads(path.read_text())["cells"]
    code = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in cells
        if c["cell_type"] == "code"
    ]
    assert [m for source in code for m in deep_imports(source)] == []
