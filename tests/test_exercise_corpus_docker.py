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

JOURNAL_OPEN = 'self.log = open(os.path.join(args["model_repository"], "requests.log"), "a")'
JOURNAL_WRITE = '            self.log.write(f"{float(x.sum())}\\n")\n            self.log.flush()   # on disk now, not when the model unloads\n'
JOURNAL = {
    "solution": (body("05-journal"), None),
    "line-buffered file": (
        edit(
            "05-journal",
            (JOURNAL_OPEN, JOURNAL_OPEN.replace('"a")', '"a", buffering=1)')),
            ("            self.log.flush()   # on disk now, not when the model unloads\n", ""),
        ),
        None,
    ),
    "opened and closed per request": (
        edit(
            "05-journal",
            (JOURNAL_OPEN, 'self.path = os.path.join(args["model_repository"], "requests.log")'),
            (
                JOURNAL_WRITE,
                '            with open(self.path, "a") as log:\n                print(float(np.sum(x)), file=log)\n',
            ),
            ("    def finalize(self):\n        self.log.close()\n", ""),
            ("import os\n", "import os\n\nimport numpy as np\n"),
        ),
        None,
    ),
    "pathlib, beside the version folder": (
        edit(
            "05-journal",
            (JOURNAL_OPEN, 'self.log = (pathlib.Path(__file__).resolve().parent.parent / "requests.log").open("a")'),
            ("import os\n", "import os\nimport pathlib\n"),
        ),
        None,
    ),
    "the starter": (body("05-journal", "starter"), "no-file"),
    "in /tmp, inside the container": (
        edit("05-journal", ('os.path.join(args["model_repository"], "requests.log")', '"/tmp/requests.log"')),
        "no-file",
    ),
    "in the version folder": (
        edit(
            "05-journal",
            (
                'os.path.join(args["model_repository"], "requests.log")',
                'os.path.join(args["model_repository"], args["model_version"], "requests.log")',
            ),
        ),
        "no-file",
    ),
    "never flushed": (
        edit("05-journal", ("            self.log.flush()   # on disk now, not when the model unloads\n", "")),
        "unflushed",
    ),
    "rewritten per request": (
        edit(
            "05-journal",
            (JOURNAL_OPEN, 'self.path = os.path.join(args["model_repository"], "requests.log")'),
            (
                JOURNAL_WRITE,
                '            with open(self.path, "w") as log:\n                log.write(f"{float(x.sum())}\\n")\n',
            ),
            ("    def finalize(self):\n        self.log.close()\n", ""),
        ),
        "values",
    ),
    "the values, not their sum": (
        edit("05-journal", ('self.log.write(f"{float(x.sum())}\\n")', 'self.log.write(f"{x.tolist()}\\n")')),
        "values",
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
        server.repository.write_config(
            labkit.model_config("journal_py", "python", inputs=[("X", "FP32", [3])], outputs=[("Y", "FP32", [3])])
        )
        yield server


@pytest.mark.parametrize("answer", list(SCALE_FILE))
def test_05_scale_file(lab, answer):
    source, rule = SCALE_FILE[answer]
    try:
        lab.python_model("filescale_py", source)
    except labkit.ModelLoadError:
        assert rule == "load"  # the notebook's own load fails the same way; the check says why
    judge(lab, "05-scale-file", lambda: None, rule)


@pytest.mark.parametrize("answer", list(JOURNAL))
def test_05_journal(lab, answer):
    source, rule = JOURNAL[answer]
    judge(lab, "05-journal", lambda: lab.python_model("journal_py", source), rule)
