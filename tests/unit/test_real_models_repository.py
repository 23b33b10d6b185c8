"""Where the real-model lesson finds examples/real_models: a checkout's, else the one labkit's lab and grader
images hold; with neither, a SetupError that names both places."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from labkit.lessons import real_models

ROOT = Path(__file__).resolve().parents[2]

# Run with only labkit's package on the path (no checkout around it), as an installed wheel is.
INSTALLED = """
import json
from labkit.course.lessons import real_models
from labkit.errors import SetupError
try:
    real_models.repository()
    error = None
except SetupError as exc:
    error = {"missing": exc.missing, "reason": exc.reason, "detail": exc.detail, "remedy": exc.remedy}
print(json.dumps({"repository": str(real_models.REPOSITORY), "error": error}))
"""


def test_a_checkout_serves_its_own_examples():
    assert real_models.REPOSITORY == real_models.CHECKOUT_REPOSITORY == ROOT / "examples" / "real_models"
    assert real_models.repository() == ROOT / "examples" / "real_models"


def test_an_installed_labkit_looks_in_the_images_place_and_says_what_to_do_when_it_is_not_there(tmp_path):
    assert not real_models.IMAGE_REPOSITORY.exists()  # this machine is no lab image
    shutil.copytree(ROOT / "labkit", tmp_path / "labkit", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", INSTALLED], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["repository"] == str(real_models.IMAGE_REPOSITORY)
    error = result["error"]
    assert (error["missing"], error["reason"]) == (str(real_models.IMAGE_REPOSITORY), "no checkout")
    places = (str(tmp_path.resolve() / "examples" / "real_models"), str(real_models.IMAGE_REPOSITORY))
    assert all(place in error["detail"] for place in places)  # it names both places it looked
    assert "labkit room image" in error["remedy"]
