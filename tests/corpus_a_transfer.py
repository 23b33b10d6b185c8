"""Answers to the exercises of notebooks 03 and 07 that ask for transfer (03-preferred: a config.pbtxt written
from nothing; 07-countdown: a decoupled Collatz stream): right ones written differently and plausible wrong
ones, with the rule each wrong one fails by. corpus_a adds them to its CASES and RULES."""

from __future__ import annotations

from corpus_tools import RIGHT, WRONG, broken, edit, solution, starter

# -- 03-preferred ---------------------------------------------------------------------------------------
PREFERRED = solution("03-preferred")
PREFERRED_BLOCKS = """%%triton_config batched_add_sub
name: "batched_add_sub"
backend: "python"
max_batch_size: 8
input [
  { name: "INPUT0", data_type: TYPE_FP32, dims: 4 },
  { name: "INPUT1", data_type: TYPE_FP32, dims: 4 }
]
output [
  { name: "OUTPUT0", data_type: TYPE_FP32, dims: 4 },
  { name: "OUTPUT1", data_type: TYPE_FP32, dims: 4 }
]
instance_group [ { count: 1, kind: KIND_CPU } ]
dynamic_batching {
  max_queue_delay_microseconds: 50000
  preferred_batch_size: 4
}
"""

# -- 07 ---------------------------------------------------------------------------------------------
COLLATZ = solution("07-countdown")
COLLATZ_STEP = "                n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
COLLATZ_LAST = (
    "            sender.send(pb_utils.InferenceResponse(last), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n"
)
COLLATZ_ERROR = """                error = pb_utils.TritonError(f"N must be at least 1, not {n}")
                sender.send(pb_utils.InferenceResponse(output_tensors=[], error=error),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""
COLLATZ_BRANCH = edit(
    COLLATZ,
    COLLATZ_STEP,
    "                if n % 2:\n                    n = 3 * n + 1\n                else:\n                    n //= 2\n",
)
COLLATZ_LIST_FIRST = edit(
    edit(
        COLLATZ,
        """            steps = 0
            while n != 1:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("VALUE", np.array([n], dtype=np.int32))]))
"""
        + COLLATZ_STEP
        + "                steps += 1\n",
        """            values = [n]
            while values[-1] != 1:
                values.append(values[-1] // 2 if values[-1] % 2 == 0 else 3 * values[-1] + 1)
            for value in values[:-1]:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("VALUE", np.array([value], dtype=np.int32))]))
            steps = len(values) - 1
""",
    ),
    'pb_utils.Tensor("STEPS", np.array([steps], dtype=np.int32))',
    'pb_utils.Tensor("STEPS", np.array([steps]).astype(np.int32))',
)
COLLATZ_ERROR_CODE = edit(
    COLLATZ,
    'pb_utils.TritonError(f"N must be at least 1, not {n}")',
    'pb_utils.TritonError(f"N={n}: no sequence", pb_utils.TritonError.INVALID_ARG)',
)
TRANSFER_CASES = [
    ("03-preferred", "solution", [PREFERRED], RIGHT),
    ("03-preferred", "blocks and scalar dims", [PREFERRED_BLOCKS], RIGHT),
    (
        "03-preferred",
        "preferred 4 and 8",
        [edit(PREFERRED, "preferred_batch_size: [ 4 ]", "preferred_batch_size: [ 4, 8 ]")],
        RIGHT,
    ),
    ("03-preferred", "starter: no data_type, no dims", [starter("03-preferred")], WRONG),
    (
        "03-preferred",
        "[2, 4]: 2 goes first",
        [edit(PREFERRED, "preferred_batch_size: [ 4 ]", "preferred_batch_size: [ 2, 4 ]")],
        WRONG,
    ),
    ("03-preferred", "no preferred size", [edit(PREFERRED, "  preferred_batch_size: [ 4 ]\n", "")], WRONG),
    (
        "03-preferred",
        "the delay in ms",
        [edit(PREFERRED, "max_queue_delay_microseconds: 50000", "max_queue_delay_microseconds: 50")],
        WRONG,
    ),
    (
        "03-preferred",
        "500 ms",
        [edit(PREFERRED, "max_queue_delay_microseconds: 50000", "max_queue_delay_microseconds: 500000")],
        WRONG,
    ),
    ("03-preferred", "max_batch_size 4", [edit(PREFERRED, "max_batch_size: 8", "max_batch_size: 4")], WRONG),
    ("03-preferred", "max_batch_size 16", [edit(PREFERRED, "max_batch_size: 8", "max_batch_size: 16")], WRONG),
    (
        "03-preferred",
        "the batch dimension written",
        [edit(PREFERRED, "dims: [ 4 ] }\ninput", "dims: [ -1, 4 ] }\ninput")],
        WRONG,
    ),
    (
        "03-preferred",
        "outputs FP64",
        [
            edit(
                PREFERRED,
                'output { name: "OUTPUT0" data_type: TYPE_FP32',
                'output { name: "OUTPUT0" data_type: TYPE_FP64',
            )
        ],
        WRONG,
    ),
    ("07-countdown", "solution", [COLLATZ], RIGHT),
    ("07-countdown", "if/else step", [COLLATZ_BRANCH], RIGHT),
    ("07-countdown", "the sequence listed first", [COLLATZ_LIST_FIRST], RIGHT),
    ("07-countdown", "an error with a code", [COLLATZ_ERROR_CODE], RIGHT),
    ("07-countdown", "starter: only n, flag alone", [starter("07-countdown")], WRONG),
    (
        "07-countdown",
        "the final flag alone, after the last value",
        [
            edit(
                COLLATZ,
                COLLATZ_LAST,
                "            sender.send(pb_utils.InferenceResponse(last))\n"
                "            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n",
            )
        ],
        WRONG,
    ),
    (
        "07-countdown",
        "STEPS on every response",
        [
            edit(
                COLLATZ,
                'sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("VALUE", np.array([n], dtype=np.int32))]))',
                'sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("VALUE", np.array([n], dtype=np.int32)), '
                'pb_utils.Tensor("STEPS", np.array([steps], dtype=np.int32))]))',
            )
        ],
        WRONG,
    ),
    ("07-countdown", "STEPS counts the responses", [edit(COLLATZ, "np.array([steps]", "np.array([steps + 1]")], WRONG),
    ("07-countdown", "stops before 1", [edit(COLLATZ, "while n != 1:", "while n > 2:")], WRONG),
    (
        "07-countdown",
        "N < 1: only the flag",
        [
            edit(
                COLLATZ,
                COLLATZ_ERROR,
                "                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n",
            )
        ],
        WRONG,
    ),
    (
        "07-countdown",
        "int64 values",
        [edit(COLLATZ, "np.array([n], dtype=np.int32)", "np.array([n], dtype=np.int64)")],
        WRONG,
    ),
    ("07-countdown", "latest cell does not compile", [COLLATZ, broken(COLLATZ)], WRONG),
]

#: The rule each wrong answer fails by.
TRANSFER_RULES: dict[tuple[str, str], str] = {
    ("03-preferred", "starter: no data_type, no dims"): "not-loaded",
    ("03-preferred", "[2, 4]: 2 goes first"): "preferred",
    ("03-preferred", "no preferred size"): "preferred",
    ("03-preferred", "the delay in ms"): "delay-short",
    ("03-preferred", "500 ms"): "delay-long",
    ("03-preferred", "max_batch_size 4"): "refused",
    ("03-preferred", "max_batch_size 16"): "max-batch",
    ("03-preferred", "the batch dimension written"): "refused",
    ("03-preferred", "outputs FP64"): "outputs",
    ("07-countdown", "starter: only n, flag alone"): "values",
    ("07-countdown", "the final flag alone, after the last value"): "empty-final",
    ("07-countdown", "STEPS on every response"): "steps",
    ("07-countdown", "STEPS counts the responses"): "steps",
    ("07-countdown", "stops before 1"): "values",
    ("07-countdown", "N < 1: only the flag"): "error",
    ("07-countdown", "int64 values"): "values",
    ("07-countdown", "latest cell does not compile"): "load",
}
