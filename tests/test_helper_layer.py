"""The helper layer (labkit/backend.hpp) isolates a bad request: it fails alone, with a message
that says what is wrong, and the other requests of the same execution are answered normally.

Each case sends a bad request together with a good one to a model that waits 50 ms for company,
so Triton hands both to the backend in one execution (the log shows "request N of 2").
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import np_to_triton_dtype

import labkit
import labkit.repository
import labkit.server
from labkit.client.inference import translate
from labkit.course import reference
from labkit.native import reference_source

PASSTHROUGH = """
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    batch.output("OUT0", batch.input("IN0"));
  });
}
"""


def _config(name: str, backend: str, dims: list[int], *, ragged: bool = False) -> labkit.repository.ModelConfig:
    cfg = labkit.model_config(
        name, backend, [("IN0", "INT32", dims)], [("OUT0", "INT32", dims)], max_batch_size=8, dynamic_batching=True
    )
    cfg.dynamic_batching.max_queue_delay_microseconds = 50_000  # two requests sent together share a batch
    if ragged:
        cfg.input[0].allow_ragged_batch = True
    return cfg


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        reference.serve(srv, ["minimal_batching", "recommended_batching"])
        yield srv


def _together(*calls: Callable[[], object]) -> list[object]:
    """Run the calls at the same moment, one thread each; each result or the exception it raised."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def _send_claiming(lab, model: str, name: str, data: np.ndarray, shape: list[int], outputs=None):
    """One request whose input carries ``data`` but declares ``shape``: tritonclient checks the two
    agree, so the shape is changed after the data is set, as a buggy client would send it."""
    client = lab.client("http")  # labkit's closes once, wherever its traceback is collected
    tensor = httpclient.InferInput(name, list(data.shape), np_to_triton_dtype(data.dtype))
    tensor.set_data_from_numpy(data)
    tensor.set_shape(shape)
    try:
        return client.infer(model, [tensor], outputs=outputs)
    except Exception as exc:  # noqa: BLE001 - turned into the labkit error a user would see
        raise translate(exc, lab, model, [tensor]) from None
    finally:
        client.close()


@pytest.mark.parametrize("model", ["minimal_batching", "recommended_batching"])
def test_short_input_fails_alone_in_its_batch(lab, model):
    name, good = next(iter(reference.sample_inputs(model).items()))
    row = list(good.shape)
    short = good.reshape(-1)[: good.size // 2].reshape(1, -1)  # half the bytes the shape needs
    before = labkit.model_stats(lab, model, settle=True)
    mark = lab.logs.mark()
    ok, bad = _together(
        lambda: labkit.infer(lab, model, {name: good}), lambda: _send_claiming(lab, model, name, short, row)
    )
    assert isinstance(ok, dict), ok
    np.testing.assert_array_equal(next(iter(ok.values())), good)
    assert isinstance(bad, labkit.InferenceError), bad
    need, have = good.nbytes, short.nbytes
    assert f"needs {need} bytes" in bad.reason and f"carries {have}" in bad.reason, bad.reason  # the backend's words
    log = lab.logs.since(mark)
    assert re.search(rf"model {model}: request [12] of 2 failed: input '{name}'", log), log[-3000:]
    delta = labkit.model_stats(lab, model, settle=True).since(before)
    assert delta.success_count == 1 and delta.fail_count == 1
    assert delta.batch_counts == {2: 1}, delta.batch_counts  # the executed batch, as Triton's utilities report it


def test_bytes_input_with_missing_strings_fails_alone(lab):
    cfg = labkit.model_config(
        "recommended_text",
        "recommended",
        [("INPUT", "BYTES", [2])],
        [("OUTPUT", "BYTES", [2])],
        max_batch_size=8,
        dynamic_batching=True,
    )
    cfg.dynamic_batching.max_queue_delay_microseconds = 50_000
    lab.repository.write_config(cfg)
    lab.cpp_backend("recommended", reference_source("recommended"), ["recommended_text"], progress=False)
    good = np.array([[b"alpha", b"beta"]], dtype=object)
    one = np.array([[b"gamma"]], dtype=object)  # one string where the shape says two
    ok, bad = _together(
        lambda: labkit.infer(lab, "recommended_text", {"INPUT": good}),
        lambda: _send_claiming(lab, "recommended_text", "INPUT", one, [1, 2]),
    )
    assert isinstance(ok, dict), ok
    assert ok["OUTPUT"].tolist() == good.tolist()
    assert isinstance(bad, labkit.InferenceError), bad
    assert "needs 2 strings" in bad.reason and "holds 1" in bad.reason, bad.reason


def test_output_split_size_is_checked(lab):
    lab.repository.write_config(_config("split_checked", "splitter", [4]))
    source = PASSTHROUGH.replace(
        'batch.output("OUT0", batch.input("IN0"));',
        (
            'labkit::Tensor in = batch.input("IN0");\n'
            '    batch.output("OUT0", TRITONSERVER_TYPE_INT32, {2}, in.bytes.data(), in.byte_size());  // 4 values a row, not 2'
        ),
    )
    lab.cpp_backend("splitter", source, ["split_checked"], progress=False)
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(lab, "split_checked", {"IN0": np.arange(4, dtype=np.int32).reshape(1, 4)})
    assert "row shape [2] of INT32 needs 8 bytes" in info.value.reason and "16" in info.value.reason, info.value.reason
    assert lab.alive


def test_ragged_request_fails_alone(lab):
    lab.repository.write_config(_config("ragged_model", "ragged", [-1], ragged=True))
    lab.cpp_backend("ragged", PASSTHROUGH, ["ragged_model"], progress=False)
    four = np.arange(4, dtype=np.int32).reshape(1, 4)
    three = np.arange(3, dtype=np.int32).reshape(1, 3)
    answers = _together(
        lambda: labkit.infer(lab, "ragged_model", {"IN0": four}),
        lambda: labkit.infer(lab, "ragged_model", {"IN0": three}),
    )
    errors = [a for a in answers if isinstance(a, BaseException)]
    served = [a for a in answers if isinstance(a, dict)]
    assert len(errors) == 1 and len(served) == 1, answers
    assert isinstance(errors[0], labkit.InferenceError) and "allow_ragged_batch" in errors[0].reason, errors[0]
    assert served[0]["OUT0"].shape[1] in (3, 4)


def test_output_allocation_failure_fails_only_that_request(lab):
    """A client asks for its output in a shared-memory region too small for it: Triton refuses the
    output buffer for that request alone."""
    key = f"/labkit_test_{os.getpid()}"
    region = shm.create_shared_memory_region("tiny", key, 4)  # OUT0 needs 16 bytes
    control = lab.client("http")
    control.register_system_shared_memory("tiny", key, 4)
    try:
        out = httpclient.InferRequestedOutput("OUT0", binary_data=True)
        out.set_shared_memory("tiny", 4)
        good = np.arange(4, dtype=np.int32).reshape(1, 4)
        ok, bad = _together(
            lambda: labkit.infer(lab, "minimal_batching", {"IN0": good}),
            lambda: _send_claiming(lab, "minimal_batching", "IN0", good + 1, [1, 4], outputs=[out]),
        )
    finally:
        control.unregister_system_shared_memory("tiny")
        control.close()
        shm.destroy_shared_memory_region(region)
    assert isinstance(ok, dict), ok
    np.testing.assert_array_equal(ok["OUT0"], good)
    assert isinstance(bad, labkit.InferenceError) and "OUT0" in bad.reason, bad


def test_foreign_model_state_is_refused_without_a_crash(lab):
    lab.repository.write_config(_config("own_state", "ownstate", [4]))
    source = """
#include "labkit/backend.hpp"
struct Mine { int answer = 42; };  // set the way Triton's example backends do, not a labkit::ModelState
TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return TRITONBACKEND_ModelSetState(model, new Mine());
}
TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &state);
  delete static_cast<Mine*>(state);
  return err;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::log_info("model " + batch.model().name + ": " + std::to_string(batch.model().max_batch_size));
    batch.output("OUT0", batch.input("IN0"));
  });
}
"""
    lab.cpp_backend("ownstate", source, ["own_state"], progress=False)
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(lab, "own_state", {"IN0": np.arange(4, dtype=np.int32).reshape(1, 4)})
    assert "LABKIT_MODEL_STATE" in info.value.reason, info.value
    assert lab.alive and labkit.check_passthrough(lab, "minimal_batching").ok


def test_batch_statistics_are_reported_when_every_request_fails(lab):
    model = "minimal_batching"
    before = labkit.model_stats(lab, model, settle=True)
    with pytest.raises(labkit.InferenceError):
        _send_claiming(lab, model, "IN0", np.arange(2, dtype=np.int32).reshape(1, 2), [1, 4])
    delta = labkit.model_stats(lab, model, settle=True).since(before)
    assert delta.fail_count == 1 and delta.execution_count == 1 and delta.batch_counts == {1: 1}, delta


def test_dropped_batch_answers_and_releases_its_requests(lab):
    """A Batch built by hand and dropped without finish(): its destructor still sends the responses
    (the failure it was told), reports statistics and releases the requests, so nothing hangs."""
    lab.repository.write_config(_config("dropped_batch", "dropper", [4]))
    source = """
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  LABKIT_TRY(labkit::Batch batch(instance, requests, count);
             batch.fail_all("dropped on purpose", TRITONSERVER_ERROR_UNAVAILABLE));
}
"""
    lab.cpp_backend("dropper", source, ["dropped_batch"], progress=False)
    before = labkit.model_stats(lab, "dropped_batch", settle=True)
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(lab, "dropped_batch", {"IN0": np.arange(4, dtype=np.int32).reshape(1, 4)})
    assert "dropped on purpose" in info.value.reason, info.value
    delta = labkit.model_stats(lab, "dropped_batch", settle=True).since(before)
    assert delta.fail_count == 1 and delta.execution_count == 1, delta
    assert lab.alive and labkit.check_passthrough(lab, "minimal_batching").ok


def test_batch_unwound_by_an_exception_answers_and_releases_its_requests(lab):
    """A Batch built by hand and unwound by an exception: its destructor sends the responses (the
    failure it was told), reports statistics and releases the requests before the handler runs."""
    lab.repository.write_config(_config("unwound_batch", "unwinder", [4]))
    source = """
#include <stdexcept>
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  try {
    labkit::Batch batch(instance, requests, count);
    batch.fail_all("unwound on purpose", TRITONSERVER_ERROR_UNAVAILABLE);
    throw std::logic_error("the backend's own failure");
  } catch (const std::logic_error& e) {
    labkit::log_info(std::string("caught after the batch answered: ") + e.what());
  }
  return nullptr;  // the Batch released the requests: Triton must not get them back
}
"""
    lab.cpp_backend("unwinder", source, ["unwound_batch"], progress=False)
    before = labkit.model_stats(lab, "unwound_batch", settle=True)
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(lab, "unwound_batch", {"IN0": np.arange(4, dtype=np.int32).reshape(1, 4)})
    assert info.value.model == "unwound_batch" and "unwound on purpose" in info.value.reason
    delta = labkit.model_stats(lab, "unwound_batch", settle=True).since(before)
    assert delta.fail_count == 1 and delta.execution_count == 1, delta
    assert lab.alive and labkit.check_passthrough(lab, "minimal_batching").ok
