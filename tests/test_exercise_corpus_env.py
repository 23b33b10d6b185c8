"""The check of notebook 11's exercise (a model that needs a package, given its environment) against a
corpus of answers: right ones written differently pass, plausible wrong ones fail with the rule that shows
what is wrong, and the check leaves nothing behind. Each answer is the shipped cell with one change, run
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


CASES = [
    ("the solution", SOLUTION, None),
    (
        "a packed environment",
        _edit(
            SOLUTION,
            ('"$$TRITON_MODEL_DIRECTORY/env"', '"$$TRITON_MODEL_DIRECTORY/env.tar.gz"'),
            ("packages, replace=True", "packages, pack=True, replace=True"),
        ),
        None,
    ),
    (
        "another folder name",
        _edit(
            SOLUTION,
            ('"$$TRITON_MODEL_DIRECTORY/env"', '"$$TRITON_MODEL_DIRECTORY/pyenv"'),
            ('moo_dir / "env"', 'moo_dir / "pyenv"'),
        ),
        None,
    ),
    ("the starter", STARTER, "not-loaded"),
    (
        "the package but no parameter",
        _edit(SOLUTION, ('parameters = {"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/env"}', "parameters = {}")),
        "not-loaded",
    ),
    (
        "an absolute path",
        _edit(
            SOLUTION,
            (
                'parameters = {"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/env"}',
                'parameters = {"EXECUTION_ENV_PATH": "/tmp/labkit-envs/moo"}',
            ),
            ('moo_dir / "env"', '"/tmp/labkit-envs/moo"'),
        ),
        "absolute-path",
    ),
]


@pytest.fixture(scope="module")
def lab():
    with labkit.start() as server:
        server.repository.write_python_model("moo", MOO)
        exec(STARTER, {"lab": server, "labkit": labkit})
        with pytest.raises(labkit.errors.MissingModuleError):
            server.load("moo")  # the stub's __pycache__ appears now, not during the first check
        yield server


@pytest.mark.parametrize(("label", "cell", "rule"), CASES, ids=[c[0] for c in CASES])
def test_an_answer_is_judged_by_what_it_does(lab, label, cell, rule):
    judge(lab, "11-own-package", lambda: exec(cell, {"lab": lab, "labkit": labkit}), rule)


def test_the_corpus_has_three_right_and_three_wrong_answers():
    rules = [rule for _, _, rule in CASES]
    assert rules.count(None) >= 3 and len(rules) - rules.count(None) >= 3
