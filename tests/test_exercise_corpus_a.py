"""The checks of notebooks 01, 03, 06 and 07 judge behaviour: every answer in corpus_a (right ones
written differently, wrong but plausible ones) gets the verdict it deserves from a real Triton, and a
check leaves no model of its own behind."""

from __future__ import annotations

import numpy as np
import pytest
from corpus_a import CASES, RULES

import labkit
import labkit.server
from labkit import exercises, magics
from labkit.course import reference
from labkit.errors import LabkitError

pytestmark = pytest.mark.slow

# What the check cell passes from the exercise cell's variables.
ANSWERS = {"03-delay": "delay_us"}
SCALER = """import json
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.scale = float(json.loads(args["model_config"])["parameters"]["scale"]["string_value"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * self.scale)])
                for r in requests]
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One server set up as notebooks 01, 03, 06 and 07 are before their exercises (its log stays in
    the test's temporary folder)."""
    with labkit.server.EmbeddedServer(workdir=tmp_path_factory.mktemp("lab")) as server:
        server.start()
        pair = [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])]
        server.repository.write_config(
            labkit.model_config(
                "compare",
                "python",
                pair,
                [("DOT", "FP32", [1]), ("ABOVE", "INT32", [1])],
                max_batch_size=8,
                dynamic_batching={"max_queue_delay_microseconds": 20000},
            )
        )
        server.repository.write_config(
            labkit.model_config(
                "divide",
                "python",
                pair,
                [("OUTPUT0", "FP32", [4])],
                max_batch_size=4,
                dynamic_batching={"max_queue_delay_microseconds": 20000},
            )
        )
        server.python_backend("scaler", SCALER)
        for name, scale in (("double", 2), ("times_ten", 10)):
            server.repository.write_config(
                labkit.model_config(
                    name, "scaler", [("X", "FP32", [3])], [("Y", "FP32", [3])], parameters={"scale": scale}
                )
            )
            server.load(name)
        collatz = labkit.model_config(
            "collatz", "python", [("N", "INT32", [1])], [("VALUE", "INT32", [1]), ("STEPS", "INT32", [1])]
        )
        collatz.model_transaction_policy.decoupled = True
        server.repository.write_config(collatz)
        batched = reference.repository() / "add_sub_batching" / "1" / "model.py"
        server.repository.write_python_model("batched_add_sub", batched)  # its config is the exercise
        server.python_model(
            "add_sub",
            reference.add_sub_source(),
            labkit.model_config("add_sub", "python", pair, [("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4])]),
        )
        doubling = labkit.model_config(
            "doubling", "python", [("X", "FP32", [4])], [("Y", "FP32", [4]), ("CALLS", "INT32", [1])]
        )
        server.repository.write_config(doubling)
        yield server


def run_cells(server: labkit.server.TritonServer, cells: list[str]) -> dict:
    """Run cells as a notebook would: a failing cell shows its error and the next one runs."""
    namespace = {"lab": server, "labkit": labkit, "np": np}
    for cell in cells:
        try:
            if cell.startswith("%%"):
                line, body = cell.split("\n", 1)
                magic, _, arguments = line[2:].partition(" ")
                getattr(magics, magic)(arguments, body)
            else:
                exec(cell, namespace)
        except LabkitError:
            pass  # the person sees the error under the cell
    return namespace


@pytest.mark.parametrize(("exercise", "label", "cells", "right"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_the_check_judges_the_answer(lab, exercise, label, cells, right):
    namespace = run_cells(lab, cells)
    answer = {ANSWERS[exercise]: namespace[ANSWERS[exercise]]} if exercise in ANSWERS else {}
    verdict = exercises.check(exercise, lab, **answer)
    assert verdict.exercise == exercise
    assert verdict.passed is right, repr(verdict)
    if right:
        assert verdict.problem == "" and verdict.hint == ""
    else:
        assert verdict.problem and verdict.hint and "\n" not in repr(verdict)
        if (exercise, label) in RULES:
            assert verdict.rule == RULES[exercise, label], repr(verdict)


def test_the_corpus_has_three_right_and_three_wrong_answers_per_exercise():
    mine = (
        "01-output2",
        "01-bad-request",
        "03-delay",
        "03-preferred",
        "06-validate",
        "06-offset",
        "07-countdown",
        "07-bls-loop",
    )
    for exercise in mine:
        verdicts = [right for e, _, _, right in CASES if e == exercise]
        assert verdicts.count(True) >= 3 and verdicts.count(False) >= 3, exercise


def test_the_latest_attempt_of_each_cell_is_recorded(lab):
    cell = exercises.REGISTRY["01-output2"].solution()
    run_cells(lab, [cell])
    assert lab.models.attempts["compare"].serving
    run_cells(lab, [cell + "\n    def oops(:\n"])
    failed = lab.models.attempts["compare"]
    assert failed.built and not failed.loaded and "SyntaxError" in failed.error
    assert lab.models.is_model_ready("compare")  # the version before it still serves: what the check must not judge
    source = exercises.REGISTRY["07-bls-loop"].solution()
    run_cells(lab, [source, source + "\n    def oops(:\n"])
    assert lab.models.attempts["doubling"].built and not lab.models.attempts["doubling"].loaded
    run_cells(lab, [source])
    assert lab.models.attempts["doubling"].serving


def test_checks_leave_no_model_of_their_own_behind(lab):
    run_cells(lab, [exercises.REGISTRY[e].solution() for e in ("01-bad-request", "06-offset", "03-preferred")])
    if "batched_add_sub" in lab.loaded_models():
        lab.unload("batched_add_sub")  # a case before may have left it loaded: the check must load it itself
    models, loaded = lab.repository.models(), lab.loaded_models()
    for exercise, answer in (
        ("01-bad-request", {}),
        ("03-delay", {"delay_us": 2000}),
        ("03-preferred", {}),
        ("06-offset", {}),
    ):
        assert exercises.check(exercise, lab, **answer).passed
    assert lab.repository.models() == models and lab.loaded_models() == loaded
    run_cells(lab, [exercises.REGISTRY["06-validate"].solution()])
    assert exercises.check("06-validate", lab).passed  # nine models of its own, two of them refused by Triton
    assert lab.repository.models() == models and lab.loaded_models() == loaded
