"""Answers to the exercises of notebooks 01, 03, 06 and 07 that a participant could write: per exercise
at least three right ones written differently and three wrong but plausible ones. Each answer is the
cells a participant runs, in order (a `%%triton_...` magic cell, or Python with `lab`, `labkit` and `np`);
test_exercise_corpus_a.py runs them against a real Triton and asserts the check's verdict both ways."""

from __future__ import annotations

from corpus_a_transfer import TRANSFER_CASES, TRANSFER_RULES
from corpus_compare import COMPARE_CASES, COMPARE_RULES
from corpus_tools import RIGHT, WRONG, broken, edit, solution, starter

# -- 01-bad-request ---------------------------------------------------------------------------------------
BAD = solution("01-bad-request")
BAD_ERROR = (
    '                error = pb_utils.TritonError("divide: INPUT1 holds a 0", pb_utils.TritonError.INVALID_ARG)\n'
    "                responses.append(pb_utils.InferenceResponse(error=error))\n"
)
BAD_VECTORIZED = """%%triton_python divide
import numpy as np
import triton_python_backend_utils as pb_utils


def refused(index):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(
        f"request {index}: INPUT1 has a zero, and nothing divides by zero", pb_utils.TritonError.INVALID_ARG))


class TritonPythonModel:
    def execute(self, requests):
        a = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        b = [pb_utils.get_input_tensor_by_name(r, "INPUT1").as_numpy() for r in requests]
        with np.errstate(divide="ignore", invalid="ignore"):
            quotients = np.split(np.concatenate(a) / np.concatenate(b), np.cumsum([len(x) for x in a])[:-1])
        return [refused(i) if not np.all(d) else pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", q)])
                for i, (d, q) in enumerate(zip(b, quotients))]
"""
# (One TritonError object shared by two responses crashed Triton 23.12's Python backend here: each
# response needs an error of its own.)
BAD_HELPER = edit(
    edit(
        BAD,
        "class TritonPythonModel:",
        """def bad_input(name):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(
        f"{name} holds a zero: cannot divide by it", code=pb_utils.TritonError.INVALID_ARG))


class TritonPythonModel:""",
    ),
    BAD_ERROR,
    '                responses.append(bad_input("INPUT1"))\n',
)
BAD_MASKED = edit(BAD, "if (b == 0).any():", "if np.count_nonzero(b) < b.size:").replace(
    "import triton_python_backend_utils", "import numpy as np\nimport triton_python_backend_utils"
)
BAD_RAISES = edit(
    BAD, BAD_ERROR + "                continue\n", '                raise ValueError("divide: INPUT1 holds a 0")\n'
)
BAD_NO_CODE = edit(BAD, ", pb_utils.TritonError.INVALID_ARG)", ")")
BAD_UNSUPPORTED = edit(BAD, "pb_utils.TritonError.INVALID_ARG", "pb_utils.TritonError.UNSUPPORTED")
BAD_VAGUE = edit(BAD, '"divide: INPUT1 holds a 0"', '"division by zero"')
BAD_ONLY_ALL_ZEROS = edit(BAD, "if (b == 0).any():", "if (b == 0).all():")
BAD_BOTH_INPUTS = edit(BAD, "if (b == 0).any():", "if (a == 0).any() or (b == 0).any():")
BAD_SKIPPED = edit(BAD, BAD_ERROR, "")
BAD_NONE = edit(BAD, BAD_ERROR, "                responses.append(None)\n")

# -- 06 ---------------------------------------------------------------------------------------------
VALID = solution("06-validate")
VALID_READ = """        text = config["parameters"].get("scale", {}).get("string_value")
        if text is None:
            raise ValueError(f"model {name}: parameter scale is missing")
        try:
            self.scale = float(text)
        except ValueError:
            raise ValueError(f"model {name}: parameter scale must be a number, not {text!r}") from None
        if not math.isfinite(self.scale) or self.scale == 0:
            raise ValueError(f"model {name}: parameter scale must be finite and not 0, not {text!r}")
"""
VALID_ASSERT = edit(
    VALID,
    VALID_READ,
    """        text = config["parameters"].get("scale", {}).get("string_value", "(missing)")
        try:
            self.scale = float(text)
        except ValueError:
            self.scale = math.nan
        assert math.isfinite(self.scale) and self.scale != 0, f"{name}: scale={text!r} is not a finite number other than 0"
""",
)
VALID_MODEL_EXCEPTION = edit(
    VALID,
    VALID_READ,
    """        scale = config["parameters"].get("scale")
        problem = None if scale is not None else "scale: missing"
        if problem is None:
            try:
                self.scale = float(scale["string_value"])
                if math.isnan(self.scale) or math.isinf(self.scale) or not self.scale:
                    problem = f"scale: {scale['string_value']} is not usable"
            except ValueError:
                problem = f"scale: {scale['string_value']} is not a number"
        if problem:
            raise pb_utils.TritonModelException(f"cannot load {name}: {problem}")
""",
)
VALID_NUMPY = edit(
    edit(
        VALID,
        VALID_READ,
        """        raw = config["parameters"].get("scale", {}).get("string_value")
        try:
            value = np.float64(raw)
        except (TypeError, ValueError):
            value = np.nan
        if not np.isfinite(value) or value == 0:
            raise ValueError(f"parameter 'scale' of {name} must be a finite, non-zero number; it is {raw!r}")
        self.scale = float(value)
""",
    ),
    "import math\n",
    "import math\n\nimport numpy as np\n",
)
VALID_NO_FINITE = edit(
    VALID, "        if not math.isfinite(self.scale) or self.scale == 0:\n", "        if self.scale == 0:\n"
)
VALID_NO_INF = edit(VALID, "not math.isfinite(self.scale)", "math.isnan(self.scale)")
VALID_POSITIVE = edit(VALID, "or self.scale == 0:", "or self.scale <= 0:")
VALID_TRITON_ERROR = edit(
    VALID,
    VALID_READ,
    """        text = config["parameters"].get("scale", {}).get("string_value", "")
        try:
            self.scale = float(text)
        except ValueError:
            raise pb_utils.TritonError(f"parameter scale must be a number, not {text!r}") from None
        if not math.isfinite(self.scale) or self.scale == 0:
            raise pb_utils.TritonError(f"parameter scale must be finite and not 0, not {text!r}")
""",
)
VALID_LOGGED = edit(
    VALID,
    VALID_READ,
    """        text = config["parameters"].get("scale", {}).get("string_value", "")
        try:
            self.scale = float(text)
        except ValueError:
            self.scale = math.nan
        if not math.isfinite(self.scale) or self.scale == 0:
            pb_utils.Logger.log_error(f"model {name}: parameter scale {text!r} is not usable; using 1")
            self.scale = 1.0
""",
)
VALID_NO_VALUE = edit(VALID, 'must be a number, not {text!r}") from None', 'must be a number") from None')
OFFSET = solution("06-offset")
OFFSET_TRY = edit(
    OFFSET,
    'self.offset = float(parameters.get("offset", {}).get("string_value", 0))',
    'try:\n            self.offset = float(parameters["offset"]["string_value"])\n'
    "        except KeyError:\n            self.offset = 0.0",
)
OFFSET_NP_ADD = edit(
    edit(
        OFFSET,
        'float(parameters.get("offset", {}).get("string_value", 0))',
        'parameters.get("offset", {"string_value": "0"})["string_value"]',
    ),
    "x * self.scale + self.offset",
    "np.add(x * self.scale, np.float32(self.offset))",
).replace("import json\n", "import json\n\nimport numpy as np\n")
OFFSET_REQUIRED = edit(
    OFFSET, 'float(parameters.get("offset", {}).get("string_value", 0))', 'float(parameters["offset"]["string_value"])'
)

# -- 07 ---------------------------------------------------------------------------------------------
LOOP = solution("07-bls-loop")
LOOP_WHILE = "            while np.abs(x).min() < 100:\n"
LOOP_CALL = """                call = pb_utils.InferenceRequest(
                    model_name="add_sub", requested_output_names=["OUTPUT0"],
                    inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x)])
                answer = call.exec()
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                x = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()
"""
LOOP_HELPER = edit(
    edit(
        LOOP,
        "class TritonPythonModel:",
        """def twice(x):
    # add_sub's sum of x and x, computed inside Triton
    answer = pb_utils.InferenceRequest(
        model_name="add_sub", requested_output_names=["OUTPUT0", "OUTPUT1"],
        inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x.copy())]).exec()
    if answer.has_error():
        raise pb_utils.TritonModelException(answer.error().message())
    return {t.name(): t.as_numpy() for t in answer.output_tensors()}["OUTPUT0"]


class TritonPythonModel:""",
    ),
    LOOP_CALL,
    "                x = twice(x)\n",
)
LOOP_FOR = edit(
    edit(
        LOOP,
        LOOP_WHILE,
        "            for calls in range(64):\n                if np.all(np.abs(x) >= 100):\n                    break\n",
    ),
    "                calls += 1\n",
    "            else:\n                calls = 64\n",
)
LOOP_ASYNC = edit(
    edit(LOOP, "    def execute(self, requests):", "    async def execute(self, requests):"),
    "answer = call.exec()",
    "answer = await call.async_exec()",
)

CASES: list[tuple[str, str, list[str], bool]] = [
    # (exercise, label, cells run in order, right?)
    *COMPARE_CASES,
    ("01-bad-request", "solution", [BAD], RIGHT),
    ("01-bad-request", "one numpy division, np.all per request", [BAD_VECTORIZED], RIGHT),
    ("01-bad-request", "a helper, the code as a keyword", [BAD_HELPER], RIGHT),
    ("01-bad-request", "np.count_nonzero", [BAD_MASKED], RIGHT),
    ("01-bad-request", "starter: inf, no error", [starter("01-bad-request")], WRONG),
    ("01-bad-request", "raises in execute", [BAD_RAISES], WRONG),
    ("01-bad-request", "TritonError without a code", [BAD_NO_CODE], WRONG),
    ("01-bad-request", "code UNSUPPORTED", [BAD_UNSUPPORTED], WRONG),
    ("01-bad-request", "message names no input", [BAD_VAGUE], WRONG),
    ("01-bad-request", "only an all-zero INPUT1 refused", [BAD_ONLY_ALL_ZEROS], WRONG),
    ("01-bad-request", "a 0 in INPUT0 refused too", [BAD_BOTH_INPUTS], WRONG),
    ("01-bad-request", "no response for the bad request", [BAD_SKIPPED], WRONG),
    ("01-bad-request", "None for the bad request", [BAD_NONE], WRONG),
    ("01-bad-request", "latest cell does not compile", [BAD, broken(BAD)], WRONG),
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
    ("06-validate", "solution", [VALID], RIGHT),
    ("06-validate", "assert with a message", [VALID_ASSERT], RIGHT),
    ("06-validate", "TritonModelException", [VALID_MODEL_EXCEPTION], RIGHT),
    ("06-validate", "numpy, one message for all", [VALID_NUMPY], RIGHT),
    ("06-validate", "starter: float() alone", [starter("06-validate")], WRONG),
    ("06-validate", "NaN and inf let through", [VALID_NO_FINITE], WRONG),
    ("06-validate", "inf let through", [VALID_NO_INF], WRONG),
    ("06-validate", "negative scales refused", [VALID_POSITIVE], WRONG),
    ("06-validate", "raises pb_utils.TritonError (not an exception)", [VALID_TRITON_ERROR], WRONG),
    ("06-validate", "logs and loads with 1", [VALID_LOGGED], WRONG),
    ("06-validate", "message without the value", [VALID_NO_VALUE], WRONG),
    ("06-validate", "latest cell does not compile", [VALID, broken(VALID)], WRONG),
    ("06-offset", "solution", [OFFSET], RIGHT),
    ("06-offset", "try/except KeyError", [OFFSET_TRY], RIGHT),
    ("06-offset", "default string and np.add", [OFFSET_NP_ADD], RIGHT),
    (
        "06-offset",
        "offset before scale, written out",
        [edit(OFFSET, "x * self.scale + self.offset", "self.offset + self.scale * x")],
        RIGHT,
    ),
    ("06-offset", "starter: + 1", [starter("06-offset")], WRONG),
    ("06-offset", "offset required", [OFFSET_REQUIRED], WRONG),
    ("06-offset", "offset ignored", [edit(OFFSET, "x * self.scale + self.offset", "x * self.scale")], WRONG),
    (
        "06-offset",
        "offset subtracted",
        [edit(OFFSET, "x * self.scale + self.offset", "x * self.scale - self.offset")],
        WRONG,
    ),
    (
        "06-offset",
        "(x + offset) * scale",
        [edit(OFFSET, "x * self.scale + self.offset", "(x + self.offset) * self.scale")],
        WRONG,
    ),
    ("06-offset", "default 1", [edit(OFFSET, '.get("string_value", 0)', '.get("string_value", 1)')], WRONG),
    ("06-offset", "latest cell does not compile", [OFFSET, broken(OFFSET)], WRONG),
    ("07-bls-loop", "solution", [LOOP], RIGHT),
    ("07-bls-loop", "a helper function", [LOOP_HELPER], RIGHT),
    ("07-bls-loop", "a for loop with break", [LOOP_FOR], RIGHT),
    ("07-bls-loop", "async_exec", [LOOP_ASYNC], RIGHT),
    ("07-bls-loop", "starter: no call", [starter("07-bls-loop")], WRONG),
    (
        "07-bls-loop",
        "doubled here, not by add_sub",
        [edit(LOOP, LOOP_CALL, "                x = x + x\n                calls += 0\n")],
        WRONG,
    ),
    (
        "07-bls-loop",
        "one call, whatever the answer",
        [edit(LOOP, LOOP_WHILE, "            if np.abs(x).min() < 100:\n")],
        WRONG,
    ),
    ("07-bls-loop", "stops at 100 exclusive", [edit(LOOP, "np.abs(x).min() < 100", "np.abs(x).min() <= 100")], WRONG),
    (
        "07-bls-loop",
        "an output it did not ask for",
        [edit(LOOP, '"OUTPUT0").as_numpy()', '"OUTPUT1").as_numpy() + x + x')],
        WRONG,
    ),
    ("07-bls-loop", "latest cell does not compile", [LOOP, broken(LOOP)], WRONG),
    *TRANSFER_CASES,
]

#: The rule a wrong answer fails by, where the check names one (the other cases assert only the verdict).
RULES: dict[tuple[str, str], str] = {
    **COMPARE_RULES,
    ("01-bad-request", "starter: inf, no error"): "no-error",
    ("01-bad-request", "raises in execute"): "failed-all",
    ("01-bad-request", "TritonError without a code"): "code",
    ("01-bad-request", "code UNSUPPORTED"): "code",
    ("01-bad-request", "message names no input"): "message",
    ("01-bad-request", "only an all-zero INPUT1 refused"): "no-error",
    ("01-bad-request", "a 0 in INPUT0 refused too"): "refused-good",
    ("01-bad-request", "no response for the bad request"): "failed-all",
    ("01-bad-request", "None for the bad request"): "failed-all",
    ("01-bad-request", "latest cell does not compile"): "load",
    ("06-validate", "starter: float() alone"): "unclear",
    ("06-validate", "NaN and inf let through"): "accepted",
    ("06-validate", "inf let through"): "accepted",
    ("06-validate", "negative scales refused"): "refused-good",
    ("06-validate", "raises pb_utils.TritonError (not an exception)"): "unclear",
    ("06-validate", "logs and loads with 1"): "accepted",
    ("06-validate", "message without the value"): "unclear",
    ("06-validate", "latest cell does not compile"): "load",
    ("07-bls-loop", "starter: no call"): "values",
    ("07-bls-loop", "doubled here, not by add_sub"): "calls",
    ("07-bls-loop", "one call, whatever the answer"): "values",
    ("07-bls-loop", "stops at 100 exclusive"): "values",
    ("07-bls-loop", "latest cell does not compile"): "load",
    **TRANSFER_RULES,
}
