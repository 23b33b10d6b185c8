"""The checks of notebook 12 against a corpus of answers: right ones written differently pass, plausible
wrong ones fail with the rule that shows what is wrong, and no check leaves anything behind (what serves
included: the loading check unloads both callees and puts back what it found).

Each answer is the reference solution (or starter) with one change, served by a real Triton the way the
notebook's cell serves it (``python_model``, as ``%%triton_python`` does)."""

from __future__ import annotations

import pytest
from answers import body, edit, judge

import labkit
import labkit.server
from labkit.course.exercises import nb12
from labkit.course.lessons import decoupled


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as server:
        server.start()
        for factor, name in nb12.SCALERS.items():
            config = labkit.model_config(name, "python", [("X", "FP32", [4])], [("Y", "FP32", [4])])
            server.python_model(name, nb12.SCALER_SOURCE.format(factor=factor), config)
            server.unload(name)  # loaded once, so that the stub's __pycache__ is there before any check
        server.repository.write_config(
            labkit.model_config(
                nb12.PICKER, "python", [("X", "FP32", [4]), ("FACTOR", "INT32", [1])], [("Y", "FP32", [4])]
            )
        )
        decoupled.setup(server)  # repeat_py
        server.repository.write_config(
            labkit.model_config(
                nb12.STATS, "python", [("IN", "INT32", [-1])], [("COUNT", "INT32", [1]), ("TOTAL", "INT32", [1])]
            )
        )
        yield server


# -- 12-load-on-demand -------------------------------------------------------------------------------------

UNLOAD_OTHER = """            if pb_utils.is_model_ready(model_name=other):
                pb_utils.unload_model(model_name=other)
"""
LOAD_NEEDED = """            if not pb_utils.is_model_ready(model_name=needed):
                pb_utils.load_model(model_name=needed)  # from the repository: its own config.pbtxt and model.py
"""

LOAD = {
    "solution": (body("12-load-on-demand"), None),
    "loaded every time, unloaded without asking": (
        edit(
            "12-load-on-demand",
            (UNLOAD_OTHER, "            pb_utils.unload_model(other)\n"),
            (LOAD_NEEDED, "            pb_utils.load_model(needed)\n"),
        ),
        None,
    ),
    "the names from a table, loaded before the other goes": (
        edit(
            "12-load-on-demand",
            (
                '            needed, other = ("scale_x2", "scale_x3") if factor == 2 else ("scale_x3", "scale_x2")\n',
                '            names = {2: "scale_x2", 3: "scale_x3"}\n'
                "            needed, other = names[factor], names[5 - factor]\n",
            ),
            (UNLOAD_OTHER + LOAD_NEEDED, LOAD_NEEDED + UNLOAD_OTHER),
        ),
        None,
    ),
    "the starter (nothing loaded)": (body("12-load-on-demand", "starter"), "error"),
    "loaded, the other never unloaded": (edit("12-load-on-demand", (UNLOAD_OTHER, "")), "both-loaded"),
    "unloaded again after the call": (
        edit(
            "12-load-on-demand",
            (UNLOAD_OTHER, ""),
            (
                "            if answer.has_error():\n",
                "            pb_utils.unload_model(model_name=needed)\n            if answer.has_error():\n",
            ),
        ),
        "not-kept",
    ),
    "the names swapped": (
        edit(
            "12-load-on-demand",
            ('("scale_x2", "scale_x3") if factor == 2', '("scale_x3", "scale_x2") if factor == 2'),
            ('else ("scale_x3", "scale_x2")', 'else ("scale_x2", "scale_x3")'),
        ),
        "values",
    ),
}


@pytest.mark.parametrize("answer", list(LOAD))
def test_12_load_on_demand(lab, answer):
    source, rule = LOAD[answer]
    judge(lab, "12-load-on-demand", lambda: lab.python_model(nb12.PICKER, source), rule)


# -- 12-bls-decoupled --------------------------------------------------------------------------------------

LOOP = """            for answer in call.exec(decoupled=True):
                if answer.has_error():
                    error = answer.error().message()
                    break
                out = pb_utils.get_output_tensor_by_name(answer, "OUT")
                if out is not None:  # the last response may carry only the final flag
                    count += 1
                    total += int(out.as_numpy()[0])
"""

STATS = {
    "solution": (body("12-bls-decoupled"), None),
    "awaited async_exec in a model that is not decoupled": (
        edit(
            "12-bls-decoupled",
            ("    def execute(self, requests):", "    async def execute(self, requests):"),
            ("call.exec(decoupled=True)", "await call.async_exec(decoupled=True)"),
        ),
        None,
    ),
    "outputs checked with output_tensors()": (
        edit(
            "12-bls-decoupled",
            (
                LOOP,
                """            for answer in call.exec(decoupled=True):
                if answer.has_error():
                    error = answer.error().message()
                    break
                if answer.output_tensors():
                    count += 1
                    total += int(pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy().sum())
""",
            ),
        ),
        None,
    ),
    "the starter (a plain exec)": (body("12-bls-decoupled", "starter"), "error"),
    "the empty final response counted": (
        edit(
            "12-bls-decoupled",
            (
                """                if out is not None:  # the last response may carry only the final flag
                    count += 1
                    total += int(out.as_numpy()[0])
""",
                """                count += 1
                if out is not None:
                    total += int(out.as_numpy()[0])
""",
            ),
        ),
        "count",
    ),
    "TOTAL holds the last OUT only": (
        edit("12-bls-decoupled", ("total += int(out.as_numpy()[0])", "total = int(out.as_numpy()[0])")),
        "total",
    ),
}


@pytest.mark.parametrize("answer", list(STATS))
def test_12_bls_decoupled(lab, answer):
    source, rule = STATS[answer]
    judge(lab, "12-bls-decoupled", lambda: lab.python_model(nb12.STATS, source), rule)
