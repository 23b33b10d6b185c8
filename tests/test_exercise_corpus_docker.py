"""The checks of notebook 05 against a corpus of answers, in the offline CPU image (one container for all):
right answers written differently pass, plausible wrong ones fail with the rule that shows what is wrong,
and no check leaves anything behind (the checks' models and files, the person's scale.txt)."""

from __future__ import annotations

import pytest
from answers import body, edit, judge

import labkit
from labkit.server.launchers.docker import DockerServer

pytestmark = pytest.mark.slow

FILE_READ = 'with open(os.path.join(args["model_repository"], "scale.txt")) as handle:\n            self.scale = float(handle.read())'
SCALE_FILE = {
    "solution": (body("05-scale-file"), None),
    "pathlib": (
        edit(
            "05-scale-file",
            (
                FILE_READ,
                'import pathlib\n        self.scale = float((pathlib.Path(args["model_repository"]) / '
                '"scale.txt").read_text())',
            ),
        ),
        None,
    ),
    "beside the version folder of model.py": (
        edit(
            "05-scale-file",
            (
                FILE_READ,
                'self.scale = float(open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scale.txt")).read())',
            ),
        ),
        None,
    ),
    "numpy reads it": (
        edit(
            "05-scale-file",
            (
                FILE_READ,
                "import numpy as np\n        self.scale = float(np.loadtxt("
                'os.path.join(args["model_repository"], "scale.txt")))',
            ),
        ),
        None,
    ),
    "the starter": (body("05-scale-file", "starter"), "values"),
    "the notebook's first number, hard-coded": (edit("05-scale-file", (FILE_READ, "self.scale = 2.0")), "values"),
    "rounded to an integer": (edit("05-scale-file", ("float(handle.read())", "int(float(handle.read()))")), "values"),
    "relative to the working directory": (
        edit("05-scale-file", ('os.path.join(args["model_repository"], "scale.txt")', '"scale.txt"')),
        "load",
    ),
    "in the version folder": (
        edit(
            "05-scale-file",
            (
                'os.path.join(args["model_repository"], "scale.txt")',
                'os.path.join(args["model_repository"], args["model_version"], "scale.txt")',
            ),
        ),
        "load",
    ),
}


@pytest.fixture(scope="module")
def lab(cpu_image):
    with DockerServer(image=cpu_image) as server:
        server.start(timeout_s=120)
        server.repository.write_config(
            labkit.model_config("filescale_py", "python", inputs=[("X", "FP32", [3])], outputs=[("Y", "FP32", [3])])
        )
        server.repository.write_file("filescale_py", "scale.txt", "2\n", version=None)
        yield server


@pytest.mark.parametrize("answer", list(SCALE_FILE))
def test_05_scale_file(lab, answer):
    source, rule = SCALE_FILE[answer]
    try:
        lab.python_model("filescale_py", source)
    except labkit.ModelLoadError:
        assert rule == "load"  # the notebook's own load fails the same way; the check says why
    judge(lab, "05-scale-file", lambda: None, rule)
