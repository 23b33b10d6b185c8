"""Stateful models against a real Triton: the reference sequence_accumulate (Python, control inputs) and
sequence_accumulate_cpp (C++, implicit state) keep one running sum per sequence while sequences
interleave, over HTTP and gRPC, sent by the real tritonclient and by labkit (infer, run_sequences);
a request without a sequence id is a SequenceError; the timeline shows which sequence each slot served."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import labkit
import labkit.errors
import labkit.observe.sequence_timeline
import labkit.server
from labkit.client.sequence_ids import sequence_of, tag
from labkit.course import reference
from labkit.repository import ModelRepository, is_stateful

MODELS = ("sequence_accumulate", "sequence_accumulate_cpp")
CLIENTS = {"http": httpclient, "grpc": grpcclient}


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as server:
        server.start()
        reference.serve(server, MODELS)
        yield server


def _client(lab, protocol):
    url = lab.endpoints.http_url if protocol == "http" else lab.endpoints.grpc_url
    return CLIENTS[protocol].InferenceServerClient(url)


def _interleaved(values: dict[int, list[int]]) -> list[tuple[int, int, int]]:
    """(sequence id, step, value) round-robin over the sequences: step 0 of each, then step 1 of each, ..."""
    longest = max(len(v) for v in values.values())
    return [(sid, k, vals[k]) for k in range(longest) for sid, vals in values.items() if k < len(vals)]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", MODELS)
def test_interleaved_sequences_from_tritonclient_keep_their_own_sums(lab, model, protocol):
    values = {101: [1, 2, 3, 4], 202: [10, -20, 30], 303: [7, 7, 7, 7, 7]}
    client, mod = _client(lab, protocol), CLIENTS[protocol]
    got: dict[int, list[int]] = {sid: [] for sid in values}
    try:
        for sid, step, value in _interleaved(values):
            tensor = mod.InferInput("INPUT", [1, 1], "INT32")
            tensor.set_data_from_numpy(np.array([[value]], np.int32))
            result = client.infer(
                model, [tensor], sequence_id=sid, sequence_start=step == 0, sequence_end=step == len(values[sid]) - 1
            )
            got[sid].append(int(result.as_numpy("OUTPUT")[0, 0]))
    finally:
        client.close()
    assert got == {sid: np.cumsum(vals).tolist() for sid, vals in values.items()}


@pytest.mark.parametrize("model", MODELS)
def test_concurrent_sequences_over_both_protocols_keep_their_sums(lab, model):
    """Six sequences at once, each from its own thread and client (HTTP and gRPC alternately)."""
    values = {sid: [sid, -1, 2 * sid, 5, 0, 1] for sid in range(21, 27)}
    got: dict[int, list[int]] = {}

    def one(sid):
        protocol = "http" if sid % 2 else "grpc"
        client, mod = _client(lab, protocol), CLIENTS[protocol]
        try:
            sums = []
            for step, value in enumerate(values[sid]):
                tensor = mod.InferInput("INPUT", [1, 1], "INT32")
                tensor.set_data_from_numpy(np.array([[value]], np.int32))
                result = client.infer(
                    model,
                    [tensor],
                    sequence_id=sid,
                    sequence_start=step == 0,
                    sequence_end=step == len(values[sid]) - 1,
                )
                sums.append(int(result.as_numpy("OUTPUT")[0, 0]))
            got[sid] = sums
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(sid,)) for sid in values]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == {sid: np.cumsum(vals).tolist() for sid, vals in values.items()}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", MODELS)
def test_labkit_infer_sends_sequences_and_start_resets_a_reused_id(lab, model, protocol):
    def send(sid, value, start=False, end=False):
        out = labkit.infer(
            lab,
            model,
            {"INPUT": np.array([[value]], np.int32)},
            protocol=protocol,
            sequence_id=sid,
            sequence_start=start,
            sequence_end=end,
        )
        return int(out["OUTPUT"][0, 0])

    assert [
        send(5, 2, start=True),
        send(6, 100, start=True),
        send(5, 3),
        send(6, 1, end=True),
        send(5, 4, end=True),
    ] == [2, 100, 5, 101, 9]
    assert [send(5, 40, start=True), send(5, 2, end=True)] == [40, 42]  # the id again: a new sum from START


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", MODELS)
def test_a_request_without_a_sequence_id_is_a_sequence_error(lab, model, protocol):
    with pytest.raises(labkit.SequenceError) as caught:
        labkit.infer(lab, model, {"INPUT": np.array([[1]], np.int32)}, protocol=protocol)
    assert (caught.value.model, caught.value.problem, caught.value.sequence_id) == (model, "no-sequence-id", 0)
    # inputs that do not fit stay a RequestError: that is what Triton refused first
    with pytest.raises(labkit.RequestError) as wrong:
        labkit.infer(
            lab, model, {"INPUT": np.array([[1.0]], np.float32)}, protocol=protocol, sequence_id=3, sequence_start=True
        )
    assert not isinstance(wrong.value, labkit.SequenceError)


def test_a_load_without_sequence_ids_counts_refusals(lab):
    result = labkit.run_load(lab, "sequence_accumulate", {"INPUT": np.array([[1]], np.int32)}, requests=3)
    assert result.count == 0 and [e.kind for e in result.errors] == ["refused"] * 3


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", MODELS)
def test_run_sequences_and_the_slots_each_sequence_held(lab, model, protocol):
    with labkit.timeline(lab, model) as tl:
        result = labkit.run_sequences(
            lab,
            model,
            lambda sid, step: {"INPUT": np.array([[sid]], np.int32)},
            concurrency=3,
            length=4,
            sequences=5,
            first_id=11,
            protocol=protocol,
        )
    assert (result.count, result.errors) == (20, [])
    assert sorted(r.sequence for r in tl.requests) == sorted(str(s) for s in range(11, 16) for _ in range(4))
    table = labkit.observe.sequence_timeline.sequence_slots(tl)
    assert 1 <= max(len(row["slots"]) for row in table) <= 3  # no more slots than sequences live at once
    for row in table:
        live = [s for s in row["slots"] if s]
        assert len(live) == len(set(live))  # one step of a sequence per execution: they are sent in order
    assert sum(len([s for s in row["slots"] if s]) for row in table) == 20
    assert labkit.plot_sequence_slots(tl)._repr_png_().startswith(b"\x89PNG")


def test_sums_after_run_sequences_start_afresh(lab):
    """A load leaves no sum behind: the next sequence with one of its ids starts from zero."""
    labkit.run_sequences(
        lab, "sequence_accumulate", {"INPUT": np.array([[3]], np.int32)}, concurrency=2, length=3, first_id=41
    )
    out = labkit.infer(
        lab,
        "sequence_accumulate",
        {"INPUT": np.array([[1]], np.int32)},
        sequence_id=41,
        sequence_start=True,
        sequence_end=True,
    )
    assert int(out["OUTPUT"][0, 0]) == 1


def test_run_sequences_refuses_sequence_id_zero(lab):
    with pytest.raises(ValueError):
        labkit.run_sequences(lab, "sequence_accumulate", {"INPUT": np.array([[1]], np.int32)}, first_id=0)


NULL_PROBE = """
import numpy as np
import triton_python_backend_utils as pb_utils


def scalar(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy()[0, 0])


class TritonPythonModel:
    def initialize(self, args):
        self.nulls, self.flagged = 0, 0  # requests with READY 0; of those, any with START, END or CORRID set

    def execute(self, requests):
        for request in requests:
            if not scalar(request, "READY"):
                self.nulls += 1
                self.flagged += any(scalar(request, name) for name in ("START", "END", "CORRID"))
        out = np.array([[self.nulls, self.flagged]], dtype=np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]) for _ in requests]
"""


def test_idle_batch_slots_carry_null_requests_with_ready_0(lab):
    """What the notebook says of null requests, seen by a model with sequence_accumulate's config: an idle
    slot of a live sequence sends READY 0, with START and END 0 and (as 23.12 fills it) CORRID 0."""
    config = ModelRepository(reference.repository()).read_config("sequence_accumulate")
    config.name = "null_probe"
    config.output[0].dims[:] = [2]
    lab.python_model("null_probe", NULL_PROBE, config)
    try:
        for sid, step, value in _interleaved({31: [1, 2, 3], 32: [4, 5, 6], 33: [7, 8, 9]}):
            out = labkit.infer(
                lab,
                "null_probe",
                {"INPUT": np.array([[value]], np.int32)},
                sequence_id=sid,
                sequence_start=step == 0,
                sequence_end=step == 2,
            )
        nulls, flagged = out["OUTPUT"][0].tolist()
    finally:
        lab.unload("null_probe")
    assert nulls > 0 and flagged == 0


def test_the_config_helper_writes_the_reference_configs():
    reference_repo = ModelRepository(reference.repository())
    made = {
        "sequence_accumulate": labkit.sequence_batching(
            labkit.model_config(
                "sequence_accumulate", "python", [("INPUT", "INT32", [1])], [("OUTPUT", "INT32", [1])], max_batch_size=4
            )
        ),
        "sequence_accumulate_cpp": labkit.sequence_batching(
            labkit.model_config(
                "sequence_accumulate_cpp",
                "accumulate",
                [("INPUT", "INT32", [1])],
                [("OUTPUT", "INT32", [1])],
                max_batch_size=4,
            ),
            controls=False,
            state=("SUM_IN", "SUM_OUT", "INT32", [1]),
        ),
    }
    for name, config in made.items():
        assert config == reference_repo.read_config(name), name
        assert is_stateful(config)
    assert not is_stateful(reference_repo.read_config("add_sub"))
    with pytest.raises(labkit.errors.ConfigError):
        labkit.sequence_batching(labkit.model_config("x", "python", [], []), state=("A", "B", "INT33", [1]))


def test_sequence_tags_round_trip():
    assert sequence_of(tag("", 7)) == "7" and sequence_of(tag("labkit-debug-ab12", "s1")) == "s1"
    assert tag("abc", 0) == "abc" and sequence_of("abc") == "" and sequence_of("") == ""


def test_the_stateful_lesson_holds(lab):
    from labkit.course.lessons import stateful

    outcome = stateful.run(lab)
    assert outcome.ok, outcome.record
    assert set(outcome.record) == {f"{m} {p}" for m in stateful.MODELS for p in ("http", "grpc")} | {"slots"}
    assert "TRITONBACKEND_StateUpdate" in stateful.source(stateful.CPP_MODEL)
    assert "CONTROL_SEQUENCE_CORRID" in stateful.config_text(stateful.PY_MODEL)
    assert "CONTROL_SEQUENCE_READY" in stateful.config_text(stateful.PY_MODEL)
    wrong = stateful.Interleaved("m", "http", {1: [1, 2]}, {1: [1, 2]})  # not a running sum: the lesson says so
    assert not wrong.ok and "False" in str(wrong)
    load = stateful.slots(lab, stateful.PY_MODEL, concurrency=2, length=3, sequences=3)
    assert load.ok and 1 <= load.slots_used <= 2, str(load)
    for claim in (
        dataclasses.replace(load, length=4),
        dataclasses.replace(load, errors=1),
        dataclasses.replace(load, sequences=4),
    ):
        assert not claim.ok and str(claim).endswith("False")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", MODELS)
def test_a_sequence_request_of_two_rows_is_a_sequence_error(lab, model, protocol):
    """Triton's sequence batcher takes one row per request; the refused request starts nothing."""
    with pytest.raises(labkit.SequenceError) as caught:
        labkit.infer(
            lab,
            model,
            {"INPUT": np.array([[1], [2]], np.int32)},
            protocol=protocol,
            sequence_id=77,
            sequence_start=True,
        )
    assert (caught.value.model, caught.value.problem, caught.value.sequence_id) == (model, "rows", 77)
    out = labkit.infer(
        lab,
        model,
        {"INPUT": np.array([[4]], np.int32)},
        protocol=protocol,
        sequence_id=77,
        sequence_start=True,
        sequence_end=True,
    )
    assert int(out["OUTPUT"][0, 0]) == 4


def test_cuda_shared_memory_does_not_carry_a_sequence(lab):
    with pytest.raises(labkit.errors.ConfigError) as caught:
        labkit.infer(
            lab,
            "sequence_accumulate",
            {"INPUT": np.array([[1]], np.int32)},
            shared_memory="cuda",
            sequence_id=3,
            sequence_start=True,
        )
    assert caught.value.field == "shared_memory"
