"""Stateful models under load: N sequences at a time, each of L requests, sent in order.

    result = labkit.run_sequences(lab, "sequence_accumulate", lambda seq, step: {"INPUT": np.array([[1]], np.int32)},
                                  concurrency=4, length=8)

A model with sequence batching keeps state per sequence, so the requests of one sequence must arrive
one after another: each worker (one connection) sends a whole sequence, the first request with
sequence_start, the last with sequence_end, then takes the next sequence id. ``concurrency`` sequences
are live at once, which is what the sequence batcher spreads over its batch slots. Everything else
(time limits, errors counted by kind, the result) is labkit.traffic.generator's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..client.transports import SequenceStep, build_request
from ..errors import OptionError
from ..server.base import TritonServer
from .generator import Load, LoadResult

Inputs = Mapping[str, np.ndarray]


class SequenceLoad(Load):
    """``sequences`` sequences of ``length`` requests, ``concurrency`` of them live at a time, with ids
    ``first_id``, ``first_id + 1``, ... ``inputs``: one request's tensors, or a function of (sequence id,
    step) returning them. Its concurrency is fixed: a worker stopped mid-sequence would leave it open."""

    def __init__(
        self,
        server: TritonServer,
        model: str,
        inputs: Inputs | Callable[[int, int], Inputs],
        *,
        sequences: int,
        length: int,
        concurrency: int = 1,
        first_id: int = 1,
        **options: Any,
    ) -> None:
        if sequences < 1 or length < 1 or first_id < 1:
            raise OptionError(
                option="sequences, length and first_id",
                value=(sequences, length, first_id),
                valid="at least 1 each (sequence id 0 means no sequence)",
            )
        super().__init__(server, model, {} if callable(inputs) else inputs, concurrency=concurrency, **options)
        self.sequences, self.length = sequences, length
        self._sequence_inputs = inputs
        self._ids = itertools.count(first_id)
        self._issued = 0
        self._cursor: dict[int, tuple[int, int]] = {}  # worker slot -> (its sequence id, its next step)

    def _next_request(self, slot: int, fixed: Any) -> Any:
        sequence_id, step = self._cursor.get(slot, (0, self.length))
        if step >= self.length:  # this worker's sequence is done: the next one, if any is left
            if self._issued >= self.sequences:
                self._retired.add(slot)
                return None
            self._issued += 1
            sequence_id, step = next(self._ids), 0
        self._cursor[slot] = (sequence_id, step + 1)
        inputs = self._sequence_inputs(sequence_id, step) if callable(self._sequence_inputs) else self._sequence_inputs
        return build_request(
            self.transport,
            self.server.endpoints.http_url,
            self.model,
            inputs,
            self._outputs,
            SequenceStep(sequence_id, step == 0, step == self.length - 1),
        )


def run_sequences(
    server: TritonServer,
    model: str,
    inputs: Inputs | Callable[[int, int], Inputs],
    *,
    concurrency: int = 4,
    length: int = 8,
    sequences: int | None = None,
    first_id: int = 1,
    protocol: str = "http",
    outputs: list[str] | None = None,
    timeout_s: float | None = None,
) -> LoadResult:
    """Send ``sequences`` (default: ``concurrency``) sequences of ``length`` requests each to a stateful
    model, ``concurrency`` at a time; see SequenceLoad. Errors are counted, not raised, unless the server died."""
    load = SequenceLoad(
        server,
        model,
        inputs,
        sequences=sequences or concurrency,
        length=length,
        concurrency=concurrency,
        first_id=first_id,
        protocol=protocol,
        outputs=outputs,
        timeout_s=timeout_s,
    )
    return load.start().wait()
