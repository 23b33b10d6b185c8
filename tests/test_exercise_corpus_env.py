"""The check of notebook 11's exercise (two models that need one package, given one shared environment)
against a corpus of answers: right ones written differently pass, plausible wrong ones fail with the rule that
shows what is wrong, and the check leaves nothing behind. Each answer is the shipped cell with a change, run
as the notebook runs it, against a real Triton."""

from __future__ import annotations

import pytest
from answers import judge

import labkit
from labkit.course.exercises import REGISTRY

MOO = """
import cowsay
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()[0].decode()
            said = cowsay.get_output_string("cow", text)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SAID", np.array([said.encode()], dtype=object))]))
        return responses
"""
SOLUTION = REGISTRY["11-own-package"].solution()
STARTER = REGISTRY["11-own-package"].starter()


def _edit(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


SHARED = 'moo_parameters = {"EXECUTION_ENV_PATH": folder}\ntux_parameters = {"EXECUTION_ENV_PATH": folder}'
CASES = [
    ("the solution", SOLUTION, None),
    (
        "a packed environment, shared",
        _edit(
            SOLUTION,
            (
                SHARED,
                'packed = lab.repository.model_dir("envs") / "sayers.tar.gz"\n'
                'moo_parameters = {"EXECUTION_ENV_PATH": packed}\ntux_parameters = {"EXECUTION_ENV_PATH": packed}',
            ),
            ("packages, replace=True", "packages, pack=True, replace=True"),
        ),
        None,
    ),
    (
        "moo's environment, named by its path in both",
        _edit(
            STARTER,
            ('moo_parameters = {"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/env"}\ntux_parameters = {}', SHARED),
        ),
        None,
    ),
    ("the starter: tux has none", STARTER, "not-loaded"),
    (
        "tux reaches into moo's folder",
        _edit(
            STARTER,
            ("tux_parameters = {}", 'tux_parameters = {"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/../moo/env"}'),
        ),
        "escapes",
    ),
    (
        "an environment each",
        _edit(
            STARTER,
            ("tux_parameters = {}", 'tux_parameters = {"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/env"}'),
            (
                "env = labkit.python_env(folder, packages, replace=True, progress=None)",
                "env = labkit.python_env(folder, packages, replace=True, progress=None)\n"
                'tux_env = labkit.python_env(lab.repository.model_dir("tux") / "env", packages, replace=True, progress=None)',
            ),
        ),
        "not-shared",
    ),
    (
        "the shared path in moo's config alone",
        _edit(SOLUTION, ('tux_parameters = {"EXECUTION_ENV_PATH": folder}', "tux_parameters = {}")),
        "not-loaded",
    ),
]


@pytest.fixture(scope="module")
def lab():
    with labkit.start() as server:
        server.repository.write_python_model("moo", MOO)
        server.repository.write_python_model("tux", MOO.replace('get_output_string("cow"', 'get_output_string("tux"'))
        exec(STARTER, {"lab": server, "labkit": labkit})
        server.load("moo")  # the stubs' __pycache__ appear now, not during the first check
        server.unload("moo")
        with pytest.raises(labkit.errors.MissingModuleError):
            server.load("tux")  # the starter gives tux no environment
        yield server


@pytest.mark.parametrize(("label", "cell", "rule"), CASES, ids=[c[0] for c in CASES])
def test_an_answer_is_judged_by_what_it_does(lab, label, cell, rule):
    judge(lab, "11-own-package", lambda: exec(cell, {"lab": lab, "labkit": labkit}), rule)


def test_the_corpus_has_three_right_and_three_wrong_answers():
    rules = [rule for _, _, rule in CASES]
    assert rules.count(None) >= 3 and len(rules) - rules.count(None) >= 3
