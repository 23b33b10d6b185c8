"""Lesson: stateful models, where each answer depends on the requests of the same sequence before it.

Two reference models compute the running sum of INPUT over a sequence: sequence_accumulate (Python)
keeps one sum per sequence id itself, reading the control inputs START / END / READY / CORRID that
Triton's sequence batcher fills in; sequence_accumulate_cpp (C++, backend "accumulate") keeps nothing
and lets Triton carry the sum as implicit state (TRITONBACKEND_StateNew / StateBuffer / StateUpdate).

    lab = labkit.start()
    stateful.setup(lab)
    print(stateful.interleave(lab, stateful.PY_MODEL, {1: [1, 2, 3], 2: [10, 20, 30]}))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...native.build import reference_source
from ...observe.plots import Picture
from ...observe.sequence_timeline import plot_sequence_slots, sequence_slots
from ...observe.timelines import Timeline, timeline
from ...repository import ModelRepository
from ...server.base import TritonServer
from ...traffic.sequences import run_sequences
from .. import reference
from .outcome import Outcome

PY_MODEL, CPP_MODEL = "sequence_accumulate", "sequence_accumulate_cpp"
MODELS = (PY_MODEL, CPP_MODEL)


def config_text(model: str) -> str:
    """The reference config.pbtxt of ``model`` as written (protobuf text format with its comments: printed
    back from the message, START's kind would be missing, being the enum's default)."""
    ModelRepository(reference.repository()).read_config(model)  # a config Triton would refuse fails here
    return (reference.repository() / model / "config.pbtxt").read_text()


def source(model: str) -> str:
    """The code behind a reference stateful model: model.py, or the C++ backend's source."""
    if model == PY_MODEL:
        return (reference.repository() / PY_MODEL / "1" / "model.py").read_text()
    return reference_source("accumulate").read_text()


def setup(server: TritonServer) -> None:
    """Serve both reference stateful models (the C++ backend is built, or taken from the build cache)."""
    reference.serve(server, MODELS)


@dataclass
class Interleaved:
    """Sequences sent in turn, one request of each: the order sent, and each sequence's answers."""

    model: str
    protocol: str
    sent: dict[int, list[int]]
    sums: dict[int, list[int]]

    @property
    def ok(self) -> bool:
        return self.sums == {sid: np.cumsum(values).tolist() for sid, values in self.sent.items()}

    def __str__(self) -> str:
        lines = [f"{self.model} over {self.protocol}: {len(self.sent)} sequences sent in turn"]
        lines += [f"  sequence {sid}: INPUT {self.sent[sid]} -> OUTPUT {self.sums[sid]}" for sid in self.sent]
        lines.append(f"  each a running sum of its own: {self.ok}")
        return "\n".join(lines)


def interleave(
    server: TritonServer, model: str, sequences: Mapping[int, Sequence[int]], protocol: str = "http"
) -> Interleaved:
    """Send ``sequences`` (id -> values) round-robin with labkit.infer: step 0 of each, then step 1, ..."""
    sent = {sid: list(values) for sid, values in sequences.items()}
    sums: dict[int, list[int]] = {sid: [] for sid in sent}
    for step in range(max(map(len, sent.values()))):
        for sid, values in sent.items():
            if step < len(values):
                out = infer(
                    server,
                    model,
                    {"INPUT": np.array([[values[step]]], np.int32)},
                    protocol=protocol,
                    sequence_id=sid,
                    sequence_start=step == 0,
                    sequence_end=step == len(values) - 1,
                )
                sums[sid].append(int(out["OUTPUT"][0, 0]))
    return Interleaved(model, protocol, sent, sums)


@dataclass
class Slots:
    """A load of concurrent sequences seen through Triton's traces: which batch slot served which sequence."""

    timeline: Timeline
    sequences: int
    length: int
    concurrency: int
    errors: int

    @property
    def slots_used(self) -> int:
        """Batch slots that served a sequence: at most as many as were live at once."""
        return max((len(row["slots"]) for row in sequence_slots(self.timeline)), default=0)

    @property
    def ok(self) -> bool:
        """Every request answered and traced under its own sequence, one step per execution, and no more slots
        in use than sequences sent at a time."""
        steps = Counter(r.sequence for r in self.timeline.requests)
        one_step_each = all(
            len([s for s in row["slots"] if s]) == len({s for s in row["slots"] if s})
            for row in sequence_slots(self.timeline)
        )
        return (
            self.errors == 0
            and one_step_each
            and self.slots_used <= self.concurrency
            and steps == Counter({str(sid): self.length for sid in range(1, self.sequences + 1)})
        )

    def __str__(self) -> str:
        return (
            f"{self.timeline.model}: {self.sequences} sequences of {self.length} requests, {self.concurrency} at a "
            f"time, {self.errors} errors; every request traced under its sequence, at most {self.concurrency} "
            f"slots in use: {self.ok}"
        )

    def picture(self) -> Picture:
        return plot_sequence_slots(self.timeline)


def slots(
    server: TritonServer,
    model: str,
    *,
    concurrency: int = 4,
    length: int = 6,
    sequences: int = 6,
    protocol: str = "grpc",
) -> Slots:
    """Run ``sequences`` sequences (ids 1, 2, ...) of ``length`` requests, ``concurrency`` at a time, under a timeline."""
    with timeline(server, model) as tl:
        result = run_sequences(
            server,
            model,
            lambda sid, step: {"INPUT": np.array([[sid]], np.int32)},
            concurrency=concurrency,
            length=length,
            sequences=sequences,
            protocol=protocol,
        )
    return Slots(tl, sequences, length, concurrency, len(result.errors))


def run(server: TritonServer) -> Outcome:
    """Both models keep interleaved sequences apart, over HTTP and gRPC, and under concurrent load."""
    setup(server)
    checks = {
        f"{model} {protocol}": interleave(server, model, {1: [3, 4, 5], 2: [10, -10, 7]}, protocol).ok
        for model in MODELS
        for protocol in ("http", "grpc")
    }
    load = slots(server, CPP_MODEL)
    checks["slots"] = load.ok
    return Outcome(all(checks.values()), checks, load.picture().figure)
