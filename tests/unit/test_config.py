"""Configs as ModelConfig messages: round trips and refusals (no server)."""

from __future__ import annotations

import pytest

import labkit
import labkit.errors
from labkit.repository import config as cfgmod


def test_model_config_round_trips_through_text():
    cfg = labkit.model_config(
        "m",
        "python",
        [("X", "BYTES", [-1])],
        [("Y", "FP32", [2, 2])],
        max_batch_size=8,
        dynamic_batching={"max_queue_delay_microseconds": 500, "preferred_batch_size": [4]},
        instances=2,
        parameters={"scale": 3},
    )
    again = cfgmod.parse(cfgmod.to_text(cfg))
    assert again == cfg
    assert again.input[0].data_type == cfgmod.pb.TYPE_STRING  # BYTES in the protocol, STRING in configs
    assert again.dynamic_batching.preferred_batch_size == [4] and again.parameters["scale"].string_value == "3"


def test_a_misspelt_field_is_named():
    with pytest.raises(labkit.errors.ConfigError) as info:
        cfgmod.parse('name: "m"\nmax_batch_sise: 4\n')
    assert info.value.field == "max_batch_sise"


def test_unknown_datatype_and_kind_list_the_valid_ones():
    with pytest.raises(labkit.errors.ConfigError) as info:
        labkit.model_config("m", "python", [("X", "FLOAT", [1])], [("Y", "FP32", [1])])
    assert (info.value.field, info.value.value) == ("data_type", "FLOAT") and "FP32" in info.value.valid
    with pytest.raises(labkit.errors.ConfigError) as info:
        labkit.model_config("m", "python", [("X", "FP32", [1])], [("Y", "FP32", [1])], kind="TPU")
    assert (info.value.field, info.value.value) == ("kind", "TPU") and info.value.valid[:2] == ["CPU", "GPU"]


def test_incomplete_configs_are_refused_before_triton():
    with pytest.raises(labkit.errors.ConfigError) as info:
        cfgmod.check_complete(cfgmod.parse('name: "m"\nbackend: "python"\n'))
    assert info.value.lacks == ["input", "output"]
