"""Triton's own r23.12 example sources, unchanged, served by the embedded 2.41 server: the
volume_batching strategy library (no ModelInstanceExecute; named by TRITON_BATCH_STRATEGY_PATH) caps
a labkit Python model's dynamic batches. The examples are read from the pinned backend archive
(LABKIT_TRITON_SOURCES, as tests/conftest.py sets it) at test time."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
import labkit.errors
from labkit.native import build_backend, deploy
from labkit.observe.stats import model_stats
from labkit.traffic.generator import run_load


class Echo:
    """OUT0 = IN0, row by row, for any batch Triton forms."""

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT0", pb_utils.get_input_tensor_by_name(r, "IN0").as_numpy())]
            )
            for r in requests
        ]


@pytest.mark.slow
def test_official_volume_batching_caps_a_python_models_batches(backend_examples, fresh_server):
    lab = fresh_server
    source = backend_examples / "batching_strategies" / "volume_batching" / "src" / "volume_batching.cc"
    strategy = lab.models.build("volumebatching", source)  # unchanged; a strategy needs no Execute
    # one request: IN0 INT32 [1, 4] = 16 bytes; 32 bytes per batch lets 2 requests share one
    cfg = labkit.model_config(
        "echo",
        "python",
        [("IN0", "INT32", [4])],
        [("OUT0", "INT32", [4])],
        max_batch_size=8,
        dynamic_batching={"max_queue_delay_microseconds": 100000},
    )
    lab.python_model("echo", Echo, cfg, load=False)
    library = deploy.attach_batch_strategy(lab.repository, "echo", strategy, {"MAX_BATCH_VOLUME_BYTES": "32"})
    assert library.parent == lab.repository.model_dir("echo") and library.is_file()
    mark = lab.logs.mark()
    lab.load("echo")
    assert f"Loading custom batching strategy library {library}" in lab.logs.since(mark)
    before = model_stats(lab, "echo", settle=True)
    inputs = {"IN0": np.arange(4, dtype=np.int32).reshape(1, 4)}
    result = run_load(lab, "echo", inputs, requests=24, concurrency=8)
    assert not result.errors, result.errors[:1]
    stats = model_stats(lab, "echo", settle=True).since(before)
    assert stats.inference_count == 24
    assert stats.batch_counts and max(stats.batch_counts) <= 2, stats.batch_counts
    out = labkit.infer(lab, "echo", inputs)
    np.testing.assert_array_equal(out["OUT0"], inputs["IN0"])


def test_a_strategy_for_a_model_without_dynamic_batching_is_refused(backend_examples, fresh_server, tmp_path):
    source = backend_examples / "batching_strategies" / "single_batching" / "src" / "single_batching.cc"
    strategy = build_backend("singlebatching", source, cache=tmp_path, progress=False)
    with pytest.raises(labkit.errors.ConfigError) as info:
        deploy.attach_batch_strategy(fresh_server.repository, "add_sub", strategy)
    assert info.value.field == "dynamic_batching" and info.value.source == "add_sub"
    assert "TRITON_BATCH_STRATEGY_PATH" not in fresh_server.repository.read_config("add_sub").parameters
