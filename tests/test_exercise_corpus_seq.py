"""The checks of notebook 09's stateful exercises judge behaviour: right answers written differently pass,
plausible wrong ones fail with the rule that shows what is wrong, each served by a real Triton the way
the notebook serves it, and the check leaves nothing behind."""

from __future__ import annotations

import pytest
from answers import body, edit, judge

import labkit
import labkit.server

pytestmark = pytest.mark.slow

CORRID = 'scalar(request, "CORRID")'
STEP = "total = self.sums[sequence] = self.sums.get(sequence, 0) + x"
RESET = """                if scalar(request, "START"):
                    self.sums[sequence] = 0
"""
FORGET = """                if scalar(request, "END"):
                    del self.sums[sequence]
"""

ANSWERS = {
    "solution": (body("09-running-sum"), None),
    "request.correlation_id() instead of CORRID": (edit("09-running-sum", (CORRID, "request.correlation_id()")), None),
    "a defaultdict that keeps ended sequences": (
        edit(
            "09-running-sum",
            (FORGET, ""),
            ("self.sums = {}", "self.sums = collections.defaultdict(int)"),
            ("import numpy as np", "import collections\n\nimport numpy as np"),
            (STEP, "self.sums[sequence] += x\n                total = self.sums[sequence]"),
        ),
        None,
    ),
    "the starter: one sum for everything": (body("09-running-sum", "starter"), "values"),
    "START never read: a reused id goes on adding": (edit("09-running-sum", (RESET, ""), (FORGET, "")), "start"),
    "the sum before this request's value": (
        edit(
            "09-running-sum",
            (STEP, "total = self.sums.get(sequence, 0)\n                self.sums[sequence] = total + x"),
        ),
        "values",
    ),
    "null requests not answered apart: KeyError on CORRID 0": (
        edit(
            "09-running-sum",
            (
                '            if scalar(request, "READY"):  # READY 0: a null request filling an idle batch slot\n',
                "            if True:\n",
            ),
            (STEP, "self.sums[sequence] += x\n                total = self.sums[sequence]"),
        ),
        "failed",
    ),
    "does not load": (edit("09-running-sum", ("def initialize(self, args):", "def initialize(self, args)")), "load"),
}


COPY = "std::memcpy(buffer, &sum.data<int32_t>()[k], sizeof(int32_t));"
UPDATE = "LABKIT_CHECK(TRITONBACKEND_StateUpdate(state));"
ADD = "sum.data<int32_t>()[k] += x.data<int32_t>()[k];"
CPP_ANSWERS = {
    "solution": (body("09-implicit-state"), None),
    "assigned through a typed pointer": (
        edit("09-implicit-state", (COPY, "*static_cast<int32_t*>(buffer) = sum.data<int32_t>()[k];")),
        None,
    ),
    "states updated after the outputs": (
        edit(
            "09-implicit-state",
            (
                ADD + "\n",
                ADD + '\n    }\n    batch.output("OUTPUT", sum);\n'
                "    for (size_t k = 0; k < sum.count<int32_t>(); ++k) {\n",
            ),
            ('    }\n    batch.output("OUTPUT", sum);\n  });', "    }\n  });"),
        ),
        None,
    ),
    "the starter: no state handed back": (body("09-implicit-state", "starter"), "values"),
    "the state keeps the old sum": (
        edit("09-implicit-state", (ADD + "\n", ""), (UPDATE, UPDATE + "\n      " + ADD)),
        "values",
    ),
    "the input state's name": (edit("09-implicit-state", ('"SUM_OUT"', '"SUM_IN"')), "failed"),
    "does not compile": (edit("09-implicit-state", (UPDATE, "TRITONBACKEND_StateUpdate(state)")), "build"),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One server as notebook 09 is before its exercises: configs written with labkit's helper."""
    with labkit.server.EmbeddedServer(workdir=tmp_path_factory.mktemp("lab")) as server:
        server.start()
        server.repository.write_config(
            labkit.sequence_batching(
                labkit.model_config(
                    "running_sum", "python", [("INPUT", "INT32", [1])], [("OUTPUT", "INT32", [1])], max_batch_size=4
                )
            )
        )
        server.repository.write_config(
            labkit.sequence_batching(
                labkit.model_config(
                    "running_sum_cpp", "runsum", [("INPUT", "INT32", [1])], [("OUTPUT", "INT32", [1])], max_batch_size=4
                ),
                controls=False,
                state=("SUM_IN", "SUM_OUT", "INT32", [1]),
            )
        )
        yield server


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_09_running_sum(lab, answer):
    source, rule = ANSWERS[answer]
    if rule == "load":  # the magic's way: the failed load is recorded, the check says the latest cell did not load
        with pytest.raises(labkit.ModelLoadError):
            lab.python_model("running_sum", source)
        verdict = labkit.exercises.check("09-running-sum", lab)
        assert (verdict.passed, verdict.rule) == (False, "load"), repr(verdict)
        return
    judge(lab, "09-running-sum", lambda: lab.python_model("running_sum", source), rule)


@pytest.mark.parametrize("answer", list(CPP_ANSWERS))
def test_09_implicit_state(lab, answer):
    source, rule = CPP_ANSWERS[answer]
    if rule == "build":  # the magic's way: the failed build is recorded, the check says the latest cell did not build
        with pytest.raises(labkit.BuildError):
            lab.cpp_backend("runsum", source, first_line=2, progress=False)
        verdict = labkit.exercises.check("09-implicit-state", lab)
        assert (verdict.passed, verdict.rule) == (False, "build"), repr(verdict)
        return
    judge(lab, "09-implicit-state", lambda: lab.cpp_backend("runsum", source, first_line=2, progress=False), rule)


def test_09_without_a_model(tmp_path):
    with labkit.server.EmbeddedServer(workdir=tmp_path) as server:
        server.start()
        verdict = labkit.exercises.check("09-running-sum", server)
    assert (verdict.passed, verdict.rule) == (False, "setup"), repr(verdict)
