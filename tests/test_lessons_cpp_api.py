"""The C++ lessons on instances, decoupled responses and cancellation (labkit.course.lessons.instances,
decoupled_cpp, cancellation): each backend, written against Triton's C API alone, compiled and served by
a real Triton 23.12, its behaviour asserted, and a failure path each."""

from __future__ import annotations

import json
import queue
import re
from pathlib import Path

import numpy as np
import pytest

import labkit
import labkit.errors
import labkit.server
from labkit.course.lessons import cancellation, decoupled_cpp, instances

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        yield srv


def _magic_cells(notebook: str) -> dict[str, str]:
    cells = [
        "".join(c["source"])
        for c in json.loads((NOTEBOOKS / notebook).read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    return {cell.split("\n", 1)[0]: cell.split("\n", 1)[1] for cell in cells if cell.startswith("%%triton_")}


# -- instances: a state each, the model's state shared -----------------------------------------------------


def test_notebook_14_compiles_the_lessons_source_from_its_cell():
    assert _magic_cells("14_cpp_parameters_instances.ipynb").get("%%triton_cpp instances") == instances.SOURCE


def test_each_instance_initializes_a_state_of_its_own(lab):
    instances.setup(lab)
    lines = instances.initialized(lab)
    assert lines == [
        "instance two_instances_0_0: kind CPU, device 0, its own state number 1",
        "instance two_instances_0_1: kind CPU, device 0, its own state number 2",
    ]


def test_two_executes_run_at_once_and_only_the_guarded_counts_are_right(lab):
    instances.setup(lab)
    result = instances.busy(lab, requests=48, clients=6, work_ms=15)
    counts = result.counts()
    assert sorted(counts) == [1, 2]  # both instances answered, each with its own number
    for values in counts.values():  # each instance's own counter: 1..n, no gap, no repeat
        assert values == list(range(1, len(values) + 1))
    assert sum(len(v) for v in counts.values()) == 48
    assert sorted(a["MODEL_COUNT"] for a in result.answers) == list(range(1, 49))  # under the mutex
    assert result.most_running == 2  # two executes overlapped, never more than the two instances
    assert result.unguarded_total < 48  # read-work-write without the mutex lost updates
    assert result.ok

    mark = lab.logs.mark()
    lab.unload(instances.MODEL)
    lab.logs.settle()
    finalized = instances.finalized(lab, mark)
    # Finalize logs each instance's own count: the same split the answers showed
    assert finalized == {"two_instances_0_0": len(counts[1]), "two_instances_0_1": len(counts[2])}
    after = lab.logs.since(mark)
    assert re.search(r"model state finalized: 48 requests counted under the mutex, \d+ without it", after)
    assert after.index("model state finalized") > max(after.index(f"instance {n} finalized") for n in finalized)


def test_a_refused_request_is_counted_nowhere_and_an_unloaded_model_answers_nothing(lab):
    instances.setup(lab)  # a fresh load: fresh states
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(lab, instances.MODEL, {"WORK_MS": np.array([-5], np.int32)})
    assert "WORK_MS must be 0 to 1000, not -5" in info.value.reason
    out = labkit.infer(lab, instances.MODEL, {"WORK_MS": np.array([0], np.int32)})
    assert int(out["MODEL_COUNT"][0]) == 1 and int(out["INSTANCE_COUNT"][0]) == 1 and int(out["RUNNING"][0]) == 1
    lab.unload(instances.MODEL)
    with pytest.raises(labkit.errors.ModelNotFoundError) as missing:
        labkit.infer(lab, instances.MODEL, {"WORK_MS": np.array([0], np.int32)})
    assert missing.value.model == "two_instances" and "two_instances" not in missing.value.loaded


def test_the_instances_lesson_runs(lab):
    outcome = instances.run(lab)
    assert outcome.ok, outcome.record
    assert outcome.record["instances"] == 2 and outcome.record["most_running"] == 2


# -- decoupled in C++: a response factory --------------------------------------------------------------------


def test_n_responses_in_order_then_the_final_flag_alone(lab):
    decoupled_cpp.setup(lab)
    seen = decoupled_cpp.raw_stream(lab, [4, 8, 15, 16])
    assert seen == [({"OUT": [v], "IDX": [i]}, False) for i, v in enumerate([4, 8, 15, 16])] + [({}, True)]
    assert decoupled_cpp.raw_stream(lab, []) == [({}, True)]  # no response: the flag alone
    result = decoupled_cpp.repeat(lab, [42, -7, 0, 3, 3, 9], delay_ms=2)
    assert result.ok and result.values == [42, -7, 0, 3, 3, 9]


def test_the_decoupled_cpp_model_over_http(lab):
    decoupled_cpp.setup(lab)
    assert labkit.generate_stream(lab, decoupled_cpp.MODEL, {"IN": 4, "DELAY_MS": 0}) == [{"IDX": 0, "OUT": 4}]
    with pytest.raises(labkit.InferenceError) as info:
        labkit.infer(lab, decoupled_cpp.MODEL, decoupled_cpp.inputs([1, 2]))  # HTTP /infer refuses it
    assert "decoupled transaction policy" in info.value.reason


def test_an_error_ends_the_stream_as_its_last_response_and_the_model_keeps_serving(lab):
    decoupled_cpp.setup(lab)
    with pytest.raises(labkit.InferenceError) as info:
        decoupled_cpp.repeat(lab, [1, 2, 3], delay_ms=-1)
    assert "DELAY_MS must be one number, 0 to 1000" in info.value.reason
    assert decoupled_cpp.repeat(lab, [5, 6]).ok


# What the lesson's backend must not do, asked of 23.12 directly: send after the final flag.
AFTER_FINAL = r"""#include <string>
#include "triton/core/tritonbackend.h"

static void note(const char* what, TRITONSERVER_Error* err) {
  const std::string line = std::string("afterfinal: ") + what + ": " + (err ? TRITONSERVER_ErrorMessage(err) : "ok");
  TRITONSERVER_Error* unlogged = TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, line.c_str());
  if (unlogged != nullptr) TRITONSERVER_ErrorDelete(unlogged);
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request** requests, const uint32_t count) {
  for (uint32_t r = 0; r < count; ++r) {
    TRITONBACKEND_ResponseFactory* factory = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseFactoryNew(&factory, requests[r]);
    if (err == nullptr) {
      note("final flag", TRITONBACKEND_ResponseFactorySendFlags(factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL));
      TRITONBACKEND_Response* late = nullptr;
      note("response after final", TRITONBACKEND_ResponseNewFromFactory(&late, factory));
      if (late != nullptr) note("send after final", TRITONBACKEND_ResponseSend(late, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr));
      note("factory delete", TRITONBACKEND_ResponseFactoryDelete(factory));
    } else {
      note("factory new", err);
    }
    note("release", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
  }
  return nullptr;
}
"""


def test_23_12_does_not_refuse_a_response_after_the_final_flag(lab):
    """Triton 23.12 checks nothing here: every call succeeds and the stream carries a second final
    response, so sending the flag last, once, is the backend's own job."""
    import tritonclient.grpc as grpcclient

    config = labkit.model_config("after_final", "afterfinal", [("IN", "INT32", [1])], [("OUT", "INT32", [1])])
    config.model_transaction_policy.decoupled = True
    lab.repository.write_config(config)
    mark = lab.logs.mark()
    lab.cpp_backend("afterfinal", AFTER_FINAL, ["after_final"])
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(lab.endpoints.grpc_url)
    tensor = grpcclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], np.int32))
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        client.async_stream_infer("after_final", [tensor], enable_empty_final_response=True)
        finals = []
        for _ in range(2):
            result, error = answers.get(timeout=30)
            assert error is None
            finals.append(result.get_response().parameters["triton_final_response"].bool_param)
    finally:
        client.stop_stream()
        client.close()
    assert finals == [True, True]
    lab.logs.settle()
    notes = re.findall(r"afterfinal: ([a-z ]+): (.*)", lab.logs.since(mark))
    assert dict(notes) == {
        "final flag": "ok",
        "response after final": "ok",
        "send after final": "ok",
        "factory delete": "ok",
        "release": "ok",
    }
    lab.unload("after_final")
    assert lab.alive


def test_the_decoupled_cpp_lesson_runs(lab):
    outcome = decoupled_cpp.run(lab)
    assert outcome.ok, outcome.record
    assert outcome.record["final_flags"] == [False, False, False, True]


# -- cancellation, seen from C++ -----------------------------------------------------------------------------


def test_a_request_left_alone_runs_to_the_end(lab):
    cancellation.setup(lab)
    mark = lab.logs.mark()
    assert cancellation.count(lab, 5) == 5
    assert cancellation.log_line(lab, mark, "slowcount: counted all 5 steps")


def test_a_cancelled_call_stops_the_backend_early_and_the_server_keeps_serving(lab):
    cancellation.setup(lab)
    result = cancellation.cancel_midway(lab, steps=1000)
    assert result.client == "cancelled the call; its callback got: Locally cancelled by application!"
    assert result.total == 1000 and 0 <= result.done < 1000 and result.stopped_early
    assert cancellation.count(lab, 3) == 3  # the instance is free again, the model still serves


def test_a_cancelled_stream_stops_the_factory_loop_early(lab):
    decoupled_cpp.setup(lab)
    result = cancellation.cancel_stream(lab, length=1000, delay_ms=10, after=3)
    assert result.total == 1000 and 3 <= result.done < 1000 and result.stopped_early
    assert decoupled_cpp.repeat(lab, [7, 8, 9]).ok


def test_a_request_to_the_unloaded_model_fails_and_a_reload_serves_again(lab):
    cancellation.setup(lab)
    lab.unload(cancellation.MODEL)
    with pytest.raises(labkit.errors.ModelNotFoundError) as missing:
        cancellation.count(lab, 1)
    assert missing.value.model == "slow_count" and "slow_count" not in missing.value.loaded
    with pytest.raises(labkit.InferenceError) as info:
        cancellation.cancel_midway(lab, steps=10)  # nothing starts, nothing to cancel: the error, not a hang
    assert (info.value.model, info.value.happened) == ("slow_count", "failed before it could be cancelled")
    assert "slow_count" in info.value.reason
    lab.load(cancellation.MODEL)
    assert cancellation.count(lab, 2) == 2


def test_the_cancellation_lesson_runs(lab):
    outcome = cancellation.run(lab)
    assert outcome.ok, outcome.record
