"""labkit as a user installs it: the built wheel, in a fresh virtual environment outside the checkout,
starts Triton, serves add_sub and compiles the minimal C++ backend (headers and models are package data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent

_USE = textwrap.dedent("""
    import sys
    import labkit
    from labkit import reference
    from labkit.native import reference_source

    assert "site-packages" in labkit.__file__, labkit.__file__
    lab = labkit.start()
    try:
        reference.serve(lab, ["add_sub"])
        print("add_sub", labkit.check_add_sub(lab).ok)
        lab.repository.copy_model_from(reference.repository(), "minimal_nonbatching")
        source = reference_source("minimal").read_text() + "\\n// " + sys.argv[1] + "\\n"  # a real compile
        build = lab.models.build("minimal", source, progress=False)
        print("compiled", not build.cached, build.library.name)
        lab.cpp_backend("minimal", source, ["minimal_nonbatching"], progress=False)
        print("minimal", labkit.check_passthrough(lab, "minimal_nonbatching").ok)
    finally:
        lab.stop()
""")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_serves_and_builds_outside_the_checkout(tmp_path):
    # Build from a copy, so the checkout gets no build/ or egg-info folders.
    source = tmp_path / "src"
    shutil.copytree(
        PROJECT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "*.egg-info", "build", "__pycache__", "demo", "test-artifacts", "notebooks", "tests"
        ),
    )
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = dist.glob("labkit-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True
    )
    assert install.returncode == 0, install.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what the venv has installed
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _USE, str(time.time_ns())],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.splitlines() == ["add_sub True", "compiled True libtriton_minimal.so", "minimal True"]
