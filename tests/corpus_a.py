"""Answers to the exercises of notebooks 01, 03, 06 and 07 that a participant could write: per exercise
at least three right ones written differently and three wrong but plausible ones. Each answer is the
cells a participant runs, in order (a `%%triton_...` magic cell, or Python with `lab`, `labkit` and `np`);
test_exercise_corpus_a.py runs them against a real Triton and asserts the check's verdict both ways."""

from __future__ import annotations

from labkit.exercises import REGISTRY

RIGHT, WRONG = True, False


def solution(exercise: str) -> str:
    return REGISTRY[exercise].solution()


def starter(exercise: str) -> str:
    return REGISTRY[exercise].starter()


def edit(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` (which must be there: a corpus entry that edits nothing is a defect)."""
    assert old in text, old
    return text.replace(old, new)


def broken(cell: str) -> str:
    """The cell with a syntax error (Python) or a compile error (C++) added at its end."""
    return cell + ("\n  this does not compile;\n" if "%%triton_cpp" in cell else "\n    def oops(:\n")


# -- 01-output2 ---------------------------------------------------------------------------------------
OUT2 = solution("01-output2")
OUT2_NP = "%%triton_python add_sub3\nimport numpy as np\n" + OUT2.split("\n", 1)[1]

# -- 01-batch -------------------------------------------------------------------------------------------
BATCH_HEAD = """%%triton_python add_sub_vec
import numpy as np
import triton_python_backend_utils as pb_utils


def get(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


def answer(s, d):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", s), pb_utils.Tensor("OUTPUT1", d)])


class TritonPythonModel:
    def execute(self, requests):
        a = [get(r, "INPUT0") for r in requests]
        b = [get(r, "INPUT1") for r in requests]
"""
BATCH_OFFSETS_BY_PLUS = BATCH_HEAD + """        cuts, total = [], 0
        for x in a[:-1]:
            total = total + len(x)      # offsets summed with + in a loop: plain ints, no array work
            cuts.append(total)
        s = np.split(np.concatenate(a) + np.concatenate(b), cuts)
        d = np.split(np.concatenate(a) - np.concatenate(b), cuts)
        return [answer(x, y) for x, y in zip(s, d)]
"""
BATCH_VSTACK_SLICES = BATCH_HEAD + """        A, B = np.vstack(a), np.vstack(b)
        s, d = np.add(A, B), np.subtract(A, B)
        responses, start = [], 0
        for x in a:
            end = start + x.shape[0]
            responses.append(answer(s[start:end], d[start:end]))
            start = end
        return responses
"""
BATCH_INPUTS_DIRECTLY = """%%triton_python add_sub_vec
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        tensors = [{t.name(): t.as_numpy() for t in r.inputs()} for r in requests]
        both = np.concatenate([np.stack([t["INPUT0"], t["INPUT1"]], axis=1) for t in tensors])
        total = both[:, 0] + both[:, 1]
        diff = both[:, 0] - both[:, 1]
        rows = np.cumsum([len(t["INPUT0"]) for t in tensors])
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", s), pb_utils.Tensor("OUTPUT1", d)])
                for s, d in zip(np.split(total, rows[:-1]), np.split(diff, rows[:-1]))]
"""
BATCH_COMPREHENSION = BATCH_HEAD + """        return [answer(np.add(x, y), np.subtract(x, y)) for x, y in zip(a, b)]
"""
BATCH_SPLIT_THEN_LOOP = BATCH_HEAD + """        cuts = np.cumsum([len(x) for x in a])[:-1]
        pieces = zip(np.split(np.concatenate(a), cuts), np.split(np.concatenate(b), cuts))
        return [answer(x + y, x - y) for x, y in pieces]      # one sum per request after all
"""
BATCH_WHOLE_TO_EVERYONE = BATCH_HEAD + """        A, B = np.concatenate(a), np.concatenate(b)
        return [answer(A + B, A - B) for _ in requests]
"""
BATCH_REVERSED = edit(solution("01-batch"), "for s, d in zip(sums, diffs)", "for s, d in zip(sums[::-1], diffs[::-1])")

# -- 06 ---------------------------------------------------------------------------------------------
SCALER_PLUS_ONE = edit(starter("06-offset"), "        # your turn: self.offset from an optional \"offset\" parameter (0 when the config has none)\n", "")
THIRD_CONFIG = """cfg = labkit.model_config("times_three", backend="scaler",
                          inputs=[("X", "FP32", [3])], outputs=[("Y", "FP32", [3])], parameters={PARAMS})
lab.repository.write_config(cfg)
"""
LOAD_THIRD = 'lab.load("times_three")\n'
UNLOAD_THIRD = 'if "times_three" in lab.loaded_models():\n    lab.unload("times_three")\n'
THIRD_OWN_MODEL = """cfg = labkit.model_config("times_three", backend="python",
                          inputs=[("X", "FP32", [3])], outputs=[("Y", "FP32", [3])])
lab.repository.write_config(cfg)
lab.python_model("times_three", '''
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", 3 * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
''')
"""
THIRD_FROM_DOUBLE = """cfg = lab.repository.read_config("double")
cfg.name = "times_three"
cfg.parameters["scale"].string_value = "3"
lab.repository.write_config(cfg)
lab.load("times_three")
"""


def third(params: str, load: bool = True) -> list[str]:
    # Not rewriting the backend each time: reloading every model of it right before loading times_three
    # again is what once crashed a new stub in Triton 23.12 (its shared-memory key was still taken) and
    # left that load hanging; one case (the solution) runs the notebook's backend cell first.
    return [THIRD_CONFIG.replace("{PARAMS}", params) + (LOAD_THIRD if load else "")]


OFFSET = solution("06-offset")
OFFSET_TRY = edit(OFFSET, 'self.offset = float(parameters.get("offset", {}).get("string_value", 0))',
                  'try:\n            self.offset = float(parameters["offset"]["string_value"])\n'
                  '        except KeyError:\n            self.offset = 0.0')
OFFSET_NP_ADD = edit(edit(OFFSET, 'float(parameters.get("offset", {}).get("string_value", 0))',
                          'parameters.get("offset", {"string_value": "0"})["string_value"]'),
                     "x * self.scale + self.offset", "np.add(x * self.scale, np.float32(self.offset))").replace(
                     "import json\n", "import json\n\nimport numpy as np\n")
OFFSET_REQUIRED = edit(OFFSET, 'float(parameters.get("offset", {}).get("string_value", 0))',
                       'float(parameters["offset"]["string_value"])')

# -- 07 ---------------------------------------------------------------------------------------------
COUNTDOWN = solution("07-countdown")
COUNT_LOOP = "            for value in range(n, 0, -1):\n                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor(\"OUT\", np.array([value], dtype=np.int32))]))\n"
COUNTDOWN_WHILE = edit(COUNTDOWN, COUNT_LOOP, "            while n > 0:\n                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor(\"OUT\", np.array([n], dtype=np.int32))]))\n                n -= 1\n")
COUNTDOWN_FINAL_WITH_LAST = edit(edit(COUNTDOWN, COUNT_LOOP, "            for value in range(n, 0, -1):\n                last = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if value == 1 else 0\n                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor(\"OUT\", np.array([value], dtype=np.int32))]), flags=last)\n"),
                                 "            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n",
                                 "            if n <= 0:\n                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n")
COUNTDOWN_ARANGE = edit(COUNTDOWN, COUNT_LOOP, "            replies = [pb_utils.InferenceResponse([pb_utils.Tensor(\"OUT\", v.reshape(1))]) for v in np.arange(n, 0, -1, dtype=np.int32)]\n            for reply in replies:\n                sender.send(reply)\n")
SUM = solution("07-sum-parameter")
SUM_LINE = "std::accumulate(row, row + 4, int64_t{0})"

CASES: list[tuple[str, str, list[str], bool]] = [
    # (exercise, label, cells run in order, right?)
    ("01-output2", "solution", [OUT2], RIGHT),
    ("01-output2", "np.multiply", [edit(OUT2_NP, "a * b", "np.multiply(b, a)")], RIGHT),
    ("01-output2", "OUTPUT2 listed first", [edit(OUT2, '                pb_utils.Tensor("OUTPUT0", a + b),\n', "").replace(
        '                pb_utils.Tensor("OUTPUT2", a * b),\n', '                pb_utils.Tensor("OUTPUT2", a * b),\n                pb_utils.Tensor("OUTPUT0", a + b),\n')], RIGHT),
    ("01-output2", "element by element", [edit(OUT2_NP, "a * b", "np.array([x * y for x, y in zip(a, b)], dtype=np.float32)")], RIGHT),
    ("01-output2", "starter", [starter("01-output2")], WRONG),
    ("01-output2", "a + b", [edit(OUT2, "a * b", "a + b")], WRONG),
    ("01-output2", "shape [1, 4]", [edit(OUT2, "a * b", "(a * b).reshape(1, 4)")], WRONG),
    ("01-output2", "float64", [edit(OUT2_NP, "a * b", "(a * b).astype(np.float64)")], WRONG),
    ("01-output2", "a * a", [edit(OUT2, "a * b", "a * a")], WRONG),
    ("01-output2", "latest cell does not compile", [OUT2, broken(OUT2)], WRONG),
    ("01-batch", "solution", [solution("01-batch")], RIGHT),
    ("01-batch", "offsets summed by + in a loop", [BATCH_OFFSETS_BY_PLUS], RIGHT),
    ("01-batch", "vstack, np.add, slices", [BATCH_VSTACK_SLICES], RIGHT),
    ("01-batch", "inputs() and one stacked array", [BATCH_INPUTS_DIRECTLY], RIGHT),
    ("01-batch", "starter: a loop per request", [starter("01-batch")], WRONG),
    ("01-batch", "np.add per request in a comprehension", [BATCH_COMPREHENSION], WRONG),
    ("01-batch", "concatenate, split, then add per request", [BATCH_SPLIT_THEN_LOOP], WRONG),
    ("01-batch", "the whole batch to every request", [BATCH_WHOLE_TO_EVERYONE], WRONG),
    ("01-batch", "responses in reverse order", [BATCH_REVERSED], WRONG),
    ("01-batch", "latest cell does not compile", [solution("01-batch"), broken(solution("01-batch"))], WRONG),
    ("03-delay", "solution", [solution("03-delay")], RIGHT),
    ("03-delay", "np.int64", ["delay_us = np.int64(2000)"], RIGHT),
    ("03-delay", "a whole float", ["delay_us = 3000.0"], RIGHT),
    ("03-delay", "np.int32 2500", ["delay_us = np.int32(2500)"], RIGHT),
    ("03-delay", "starter: 0", [starter("03-delay")], WRONG),
    ("03-delay", "50 ms: everyone waits", ["delay_us = 50_000"], WRONG),
    ("03-delay", "True", ["delay_us = True"], WRONG),
    ("03-delay", "a fraction", ["delay_us = 2000.5"], WRONG),
    ("03-delay", "a string", ['delay_us = "2000"'], WRONG),
    ("03-delay", "negative", ["delay_us = -2000"], WRONG),
    ("03-preferred", "solution", [solution("03-preferred")], RIGHT),
    ("03-preferred", "[4]", ["preferred = [4]"], RIGHT),
    ("03-preferred", "a tuple (3,)", ["preferred = (3,)"], RIGHT),
    ("03-preferred", "[2, 4] with np.int64", ["preferred = [np.int64(2), 4]"], RIGHT),
    ("03-preferred", "starter: none", [starter("03-preferred")], WRONG),
    ("03-preferred", "[8]", ["preferred = [8]"], WRONG),
    ("03-preferred", "[1]", ["preferred = [1]"], WRONG),
    ("03-preferred", "[1, 2]", ["preferred = [1, 2]"], WRONG),
    ("03-preferred", "[6]", ["preferred = [6]"], WRONG),
    ("03-preferred", "strings", ['preferred = ["2"]'], WRONG),
    ("06-third-model", "solution", [SCALER_PLUS_ONE, UNLOAD_THIRD, solution("06-third-model")], RIGHT),
    ("06-third-model", "scale as the string 3.0", third('{"scale": "3.0"}'), RIGHT),
    ("06-third-model", "config copied from double", [THIRD_FROM_DOUBLE], RIGHT),
    ("06-third-model", "an extra parameter", third('{"scale": 3, "note": "triple"}'), RIGHT),
    ("06-third-model", "starter: scale 1", [starter("06-third-model")], WRONG),
    ("06-third-model", "a model.py of its own", [UNLOAD_THIRD, THIRD_OWN_MODEL], WRONG),
    ("06-third-model", "scale 1/3", third('{"scale": 1 / 3}'), WRONG),
    ("06-third-model", "scale -3", third('{"scale": -3}'), WRONG),
    ("06-third-model", "parameter 'factor' (load fails, scale 3 still serving)",
     third('{"scale": 3}') + [THIRD_CONFIG.replace("{PARAMS}", '{"factor": 3}') + LOAD_THIRD], WRONG),
    ("06-third-model", "scale 3 written, not loaded", third('{"scale": 1}') + third('{"scale": 3}', load=False), WRONG),
    ("06-offset", "solution", [OFFSET], RIGHT),
    ("06-offset", "try/except KeyError", [OFFSET_TRY], RIGHT),
    ("06-offset", "default string and np.add", [OFFSET_NP_ADD], RIGHT),
    ("06-offset", "offset before scale, written out", [edit(OFFSET, "x * self.scale + self.offset", "self.offset + self.scale * x")], RIGHT),
    ("06-offset", "starter: + 1", [starter("06-offset")], WRONG),
    ("06-offset", "offset required", [OFFSET_REQUIRED], WRONG),
    ("06-offset", "offset ignored", [edit(OFFSET, "x * self.scale + self.offset", "x * self.scale")], WRONG),
    ("06-offset", "offset subtracted", [edit(OFFSET, "x * self.scale + self.offset", "x * self.scale - self.offset")], WRONG),
    ("06-offset", "(x + offset) * scale", [edit(OFFSET, "x * self.scale + self.offset", "(x + self.offset) * self.scale")], WRONG),
    ("06-offset", "default 1", [edit(OFFSET, '.get("string_value", 0)', '.get("string_value", 1)')], WRONG),
    ("06-offset", "latest cell does not compile", [OFFSET, broken(OFFSET)], WRONG),
    ("07-countdown", "solution", [COUNTDOWN], RIGHT),
    ("07-countdown", "while loop", [COUNTDOWN_WHILE], RIGHT),
    ("07-countdown", "final flag with the last response", [COUNTDOWN_FINAL_WITH_LAST], RIGHT),
    ("07-countdown", "np.arange, sent after", [COUNTDOWN_ARANGE], RIGHT),
    ("07-countdown", "starter: only n", [starter("07-countdown")], WRONG),
    ("07-countdown", "n-1 down to 0", [edit(COUNTDOWN, "range(n, 0, -1)", "range(n - 1, -1, -1)")], WRONG),
    ("07-countdown", "counting up", [edit(COUNTDOWN, "range(n, 0, -1)", "range(1, n + 1)")], WRONG),
    ("07-countdown", "int64 responses", [edit(COUNTDOWN, "np.array([value], dtype=np.int32)", "np.array([value], dtype=np.int64)")], WRONG),
    ("07-countdown", "no final flag", [edit(COUNTDOWN, "            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n", "")], WRONG),
    ("07-countdown", "latest cell does not compile", [COUNTDOWN, broken(COUNTDOWN)], WRONG),
    ("07-sum-parameter", "solution", [SUM], RIGHT),
    ("07-sum-parameter", "a for loop", [edit(SUM, SUM_LINE, "[&] { int64_t t = 0; for (int k = 0; k < 4; ++k) t += row[k]; return t; }()")], RIGHT),
    ("07-sum-parameter", "cast and +", [edit(SUM, SUM_LINE, "static_cast<int64_t>(row[0]) + row[1] + row[2] + row[3]")], RIGHT),
    ("07-sum-parameter", "long long", [edit(SUM, SUM_LINE, "std::accumulate(row, row + 4, 0LL)")], RIGHT),
    ("07-sum-parameter", "starter: no sum", [starter("07-sum-parameter")], WRONG),
    ("07-sum-parameter", "int accumulate overflows", [edit(SUM, SUM_LINE, "std::accumulate(row, row + 4, 0)")], WRONG),
    ("07-sum-parameter", "as a string", [edit(SUM, SUM_LINE, "std::to_string(std::accumulate(row, row + 4, int64_t{0}))")], WRONG),
    ("07-sum-parameter", "three values", [edit(SUM, SUM_LINE, "std::accumulate(row, row + 3, int64_t{0})")], WRONG),
    ("07-sum-parameter", "named total", [edit(SUM, 'set_parameter(i, "sum"', 'set_parameter(i, "total"')], WRONG),
    ("07-sum-parameter", "latest cell does not compile", [SUM, broken(SUM)], WRONG),
]
