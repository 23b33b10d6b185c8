"""Whether a request fits a model's inputs: what RequestError names (pure functions)."""

from __future__ import annotations

from labkit.client.request_fit import describe_inputs, describe_sent, mismatches

ADD_SUB = {
    "max_batch_size": 0,
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": ["4"]},
        {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": ["4"]},
    ],
}
BATCHING = {
    "max_batch_size": 8,
    "input": [
        {"name": "X", "data_type": "TYPE_STRING", "dims": [-1]},
        {"name": "OPT", "data_type": "TYPE_INT32", "dims": [1], "optional": True},
    ],
}


def test_a_fitting_request_has_no_mismatch():
    assert mismatches(ADD_SUB, [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])]) == []
    assert mismatches(BATCHING, [("X", "BYTES", [3, 7])]) == []  # -1 takes any size; OPT is optional


def test_each_kind_of_mismatch_is_named():
    assert mismatches(ADD_SUB, [("INPUT0", "INT32", [4]), ("INPUT1", "FP32", [4])]) == [
        "INPUT0 is INT32, the model takes FP32"
    ]
    assert mismatches(ADD_SUB, [("INPUT0", "FP32", [3]), ("INPUT1", "FP32", [4])]) == [
        "INPUT0 has shape [3], the model takes [4]"
    ]
    assert mismatches(ADD_SUB, [("INPUT0", "FP32", [4]), ("INPUTX", "FP32", [4])]) == [
        "the model has no input 'INPUTX'",
        "input 'INPUT1' is missing",
    ]
    assert mismatches(BATCHING, [("X", "BYTES", [9, 2])]) == ["X carries a batch of 9, more than max_batch_size 8"]
    assert mismatches(BATCHING, [("X", "BYTES", [])]) == ["X has shape [], the model takes [batch] + [-1]"]


def test_descriptions_read_like_the_config():
    assert describe_inputs(ADD_SUB) == "INPUT0 FP32 [4], INPUT1 FP32 [4]"
    assert describe_inputs(BATCHING) == "X BYTES [batch] + [-1], OPT INT32 [batch] + [1]"
    assert describe_inputs({}) == "no inputs"
    assert describe_sent([("X", "BYTES", (2, 3))]) == "X BYTES [2, 3]"
