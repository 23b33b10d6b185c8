"""The checks of notebook 05 against a corpus of answers, in the offline CPU image (one container for all):
right answers written differently pass, plausible wrong ones fail with the rule that shows what is wrong,
and no check leaves anything behind (the scale check's model and file, the person's scale.txt)."""

from __future__ import annotations

import pytest

import labkit
from labkit.server.launchers.docker import DockerServer

from answers import body, edit, judge

pytestmark = pytest.mark.slow

FILE_READ = 'with open(os.path.join(args["model_repository"], "scale.txt")) as handle:\n            self.scale = float(handle.read())'
SCALE_FILE = {
    "solution": (body("05-scale-file"), None),
    "pathlib": (edit("05-scale-file", (FILE_READ, 'import pathlib\n        self.scale = float((pathlib.Path(args["model_repository"]) / '
                                                    '"scale.txt").read_text())')), None),
    "beside the version folder of model.py": (edit("05-scale-file", (FILE_READ,
        'self.scale = float(open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scale.txt")).read())')), None),
    "numpy reads it": (edit("05-scale-file", (FILE_READ, 'import numpy as np\n        self.scale = float(np.loadtxt('
                                                         'os.path.join(args["model_repository"], "scale.txt")))')), None),
    "the starter": (body("05-scale-file", "starter"), "values"),
    "the notebook's first number, hard-coded": (edit("05-scale-file", (FILE_READ, "self.scale = 2.0")), "values"),
    "rounded to an integer": (edit("05-scale-file", ("float(handle.read())", "int(float(handle.read()))")), "values"),
    "relative to the working directory": (edit("05-scale-file", ('os.path.join(args["model_repository"], "scale.txt")', '"scale.txt"')),
                                          "load"),
    "in the version folder": (edit("05-scale-file", ('os.path.join(args["model_repository"], "scale.txt")',
                                                      'os.path.join(args["model_repository"], args["model_version"], "scale.txt")')), "load"),
}

PLUS = "for (size_t k = 0; k < in.count<int32_t>(); ++k) values[k] += 1;"
PLUS_ONE = {
    "solution": (body("05-plus-one"), None),
    "std::transform": (edit("05-plus-one", ('#include "labkit/backend.hpp"', '#include <algorithm>\n\n#include "labkit/backend.hpp"'), (
        PLUS, "std::transform(values, values + in.count<int32_t>(), values, [](int32_t v) { return v + 1; });")), None),
    "a pointer walking to the end": (edit("05-plus-one", (PLUS, "for (int32_t* end = values + in.count<int32_t>(); values != end; ++values) ++*values;")), None),
    "widened, then narrowed": (edit("05-plus-one", ("values[k] += 1;", "values[k] = static_cast<int32_t>(int64_t{values[k]} + 1);")), None),
    "the starter": (body("05-plus-one", "starter"), "unchanged"),
    "only the first value": (edit("05-plus-one", (PLUS, "values[0] += 1;")), "values"),
    "the last value left out": (edit("05-plus-one", ("k < in.count<int32_t>()", "k + 1 < in.count<int32_t>()")), "values"),
    "the values read as float": (edit("05-plus-one", ("int32_t* values = in.data<int32_t>();", "float* values = in.data<float>();"),
                                       ("values[k] += 1;", "values[k] += 1.0f;")), "values"),
    "a copy incremented": (edit("05-plus-one", ("values[k] += 1;", "{ int32_t v = values[k]; v += 1; (void)v; }")), "unchanged"),
}


@pytest.fixture(scope="module")
def lab(cpu_image):
    with DockerServer(image=cpu_image) as server:
        server.start(timeout_s=120)
        server.repository.write_config(labkit.model_config(
            "filescale_py", "python", inputs=[("X", "FP32", [3])], outputs=[("Y", "FP32", [3])]))
        server.repository.write_file("filescale_py", "scale.txt", "2\n", version=None)
        server.repository.write_config(labkit.model_config(
            "plusone", "plusone", inputs=[("IN0", "INT32", [4])], outputs=[("OUT0", "INT32", [4])]))
        yield server


@pytest.mark.parametrize("answer", list(SCALE_FILE))
def test_05_scale_file(lab, answer):
    source, rule = SCALE_FILE[answer]
    try:
        lab.python_model("filescale_py", source)
    except labkit.ModelLoadError:
        assert rule == "load"  # the notebook's own load fails the same way; the check says why
    judge(lab, "05-scale-file", lambda: None, rule)


@pytest.mark.parametrize("answer", list(PLUS_ONE))
def test_05_plus_one(lab, answer):
    source, rule = PLUS_ONE[answer]
    judge(lab, "05-plus-one", lambda: lab.cpp_backend("plusone", source, first_line=2, progress=False), rule)
