"""The `labkit` pytest plugin, run by a real pytest on an example user repository (tests/plugin_example)."""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent / "plugin_example"


def _user_project(pytester, broken: bool = False) -> Path:
    for item in EXAMPLE.iterdir():
        if item.is_dir():
            shutil.copytree(item, pytester.path / item.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(item, pytester.path / item.name)
    if broken:
        model = pytester.path / "model_repository" / "doubler" / "1" / "model.py"
        model.write_text(model.read_text().replace("def execute(self, requests):", "def execute(self, requests)"))
    return pytester.path


def test_plugin_is_registered_through_the_pytest11_entry_point():
    plugins = {e.name: e.value for e in importlib.metadata.entry_points(group="pytest11")}
    assert plugins.get("labkit") == "labkit.pytest_plugin"


def test_users_tests_run_against_their_repository(pytester):
    _user_project(pytester)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_repository_option_and_a_model_that_fails_to_load(pytester):
    project = _user_project(pytester, broken=True)
    moved = project / "elsewhere"
    (project / "model_repository").rename(moved)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--triton-repo={moved}")
    assert result.ret != 0
    output = result.stdout.str() + result.stderr.str()
    assert "model 'doubler'" in output and "did not load" in output and "SyntaxError" in output


def test_missing_repository_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x(triton):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    assert "no model repository at" in result.stdout.str() + result.stderr.str()


def test_labkits_own_repository_is_served_from_a_copy(pytester):
    """--triton-repo naming labkit's reference models: they serve (C++ backends built), in a copy."""
    import labkit

    shipped = labkit.reference_repository()
    before = sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*"))
    pytester.makepyfile(
        test_x="""
import numpy as np


def test_minimal(triton):
    assert "minimal_batching" in triton.loaded_models()
    assert triton.repository.root != """
        + repr(str(shipped))
        + """
    out = triton.infer("minimal_batching", {"IN0": np.array([[1, 2, 3, 4]], np.int32)})
    assert out["OUT0"].tolist() == [[1, 2, 3, 4]]
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--triton-repo={shipped}")
    result.assert_outcomes(passed=1)
    assert sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*")) == before
