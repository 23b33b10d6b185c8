"""Answers to exercise 01-output2 (compare's model.py, written from nothing) that a participant could write:
right ones written differently and wrong but plausible ones, each wrong one with the rule of the check that
must name it. corpus_a.py adds them to its cases; test_exercise_corpus_a.py runs them against a real Triton."""

from __future__ import annotations

from corpus_tools import RIGHT, WRONG, edit

from labkit.course.exercises import REGISTRY

# -- 01-output2 ---------------------------------------------------------------------------------------
OUT2 = REGISTRY["01-output2"].solution()
OUT2_DOT = "np.sum(a * b, axis=1, keepdims=True)"
OUT2_ABOVE = "np.sum(a > b, axis=1, keepdims=True).astype(np.int32)"
OUT2_WHOLE_BATCH = """%%triton_python compare
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        a = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        b = [pb_utils.get_input_tensor_by_name(r, "INPUT1").as_numpy() for r in requests]
        rows = np.cumsum([len(x) for x in a])[:-1]
        x, y = np.concatenate(a), np.concatenate(b)
        dots = np.split(np.einsum("ij,ij->i", x, y)[:, None], rows)
        above = np.split(np.count_nonzero(x > y, axis=1).astype("int32").reshape(-1, 1), rows)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("DOT", d), pb_utils.Tensor("ABOVE", n)])
                for d, n in zip(dots, above)]
"""
OUT2_HELPER = """%%triton_python compare
import numpy
import triton_python_backend_utils as pb_utils


def answer(request):
    a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
    b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
    above = [[sum(1 for x, y in zip(row_a, row_b) if x > y)] for row_a, row_b in zip(a, b)]
    return pb_utils.InferenceResponse(output_tensors=[
        pb_utils.Tensor("ABOVE", numpy.array(above, dtype="int32")),
        pb_utils.Tensor("DOT", (a * b).sum(axis=1).reshape(-1, 1)),
    ])


class TritonPythonModel:
    def initialize(self, args):
        self.answered = 0

    def execute(self, requests):
        self.answered += len(requests)
        return [answer(request) for request in requests]
"""
OUT2_ONE_FOR_ALL = edit(
    OUT2_WHOLE_BATCH,
    """        return [pb_utils.InferenceResponse([pb_utils.Tensor("DOT", d), pb_utils.Tensor("ABOVE", n)])
                for d, n in zip(dots, above)]
""",
    """        together = [pb_utils.Tensor("DOT", np.concatenate(dots)), pb_utils.Tensor("ABOVE", np.concatenate(above))]
        return [pb_utils.InferenceResponse(together)]   # one answer for the whole batch
""",
)


COMPARE_CASES: list[tuple[str, str, list[str], bool]] = [
    ("01-output2", "solution", [OUT2], RIGHT),
    ("01-output2", "all requests as one array, split back", [OUT2_WHOLE_BATCH], RIGHT),
    ("01-output2", "a helper per request, rows counted in Python", [OUT2_HELPER], RIGHT),
    (
        "01-output2",
        "einsum and count_nonzero",
        [
            edit(
                edit(OUT2, OUT2_DOT, 'np.einsum("ij,ij->i", a, b).reshape(-1, 1)'),
                OUT2_ABOVE,
                "np.count_nonzero(a > b, axis=1)[:, None].astype(np.int32)",
            )
        ],
        RIGHT,
    ),
    ("01-output2", "starter", [REGISTRY["01-output2"].starter()], WRONG),
    ("01-output2", "ABOVE left int64", [edit(OUT2, ".astype(np.int32)", "")], WRONG),
    (
        "01-output2",
        "DOT as float64",
        [edit(OUT2, OUT2_DOT, "np.sum(a * b, axis=1, keepdims=True, dtype=np.float64)")],
        WRONG,
    ),
    ("01-output2", "DOT without its row axis", [edit(OUT2, OUT2_DOT, "np.sum(a * b, axis=1)")], WRONG),
    ("01-output2", "DOT a scalar", [edit(OUT2, OUT2_DOT, "np.sum(a * b)")], WRONG),
    (
        "01-output2",
        "DOT of the whole request",
        [edit(OUT2, OUT2_DOT, "np.full((len(a), 1), np.sum(a * b), np.float32)")],
        WRONG,
    ),
    ("01-output2", "ABOVE counts the ties", [edit(OUT2, "a > b", "a >= b")], WRONG),
    ("01-output2", "np.dot on a batch", [edit(OUT2, OUT2_DOT, "np.dot(a, b)")], WRONG),
    ("01-output2", "one answer for the whole batch", [OUT2_ONE_FOR_ALL], WRONG),
    ("01-output2", "latest cell does not compile", [OUT2, OUT2 + "\n    def oops(:\n"], WRONG),
]
COMPARE_RULES: dict[tuple[str, str], str] = {
    ("01-output2", "starter"): "error",
    ("01-output2", "ABOVE left int64"): "dtype",
    ("01-output2", "DOT as float64"): "dtype",
    ("01-output2", "DOT without its row axis"): "shape",
    ("01-output2", "DOT a scalar"): "error",
    ("01-output2", "DOT of the whole request"): "dot",
    ("01-output2", "ABOVE counts the ties"): "above",
    ("01-output2", "np.dot on a batch"): "error",
    ("01-output2", "one answer for the whole batch"): "error",
    ("01-output2", "latest cell does not compile"): "load",
}
