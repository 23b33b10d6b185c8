"""Checks of the reference models: send known inputs to add_sub or a passthrough and verify the
answers (what lessons, tests, the demo and the benchmarks use to say "it serves correctly")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..client.inference import infer, infer_together
from ..errors import AnswerMismatchError
from ..server.base import TritonServer
from . import reference


@dataclass
class AddSubResult:
    """One add_sub round trip: what was sent, what came back, and whether it was right."""

    model: str
    protocol: str
    input0: np.ndarray
    input1: np.ndarray
    output0: np.ndarray
    output1: np.ndarray
    ok: bool = field(init=False)

    def __post_init__(self) -> None:
        self.ok = bool(
            np.allclose(self.output0, self.input0 + self.input1)
            and np.allclose(self.output1, self.input0 - self.input1)
        )

    def summary(self) -> str:
        verdict = "ok" if self.ok else "WRONG"
        return (
            f"{self.model} over {self.protocol}: {verdict}\n"
            f"  INPUT0  = {self.input0.tolist()}\n  INPUT1  = {self.input1.tolist()}\n"
            f"  OUTPUT0 = {self.output0.tolist()} (sum)\n  OUTPUT1 = {self.output1.tolist()} (difference)"
        )

    def __repr__(self) -> str:
        return self.summary()


def check_add_sub(
    server: TritonServer,
    model: str = "add_sub",
    protocol: str = "http",
    *,
    batch: int | None = None,
    check: bool = True,
    client: Any = None,
    timeout_s: float | None = None,
) -> AddSubResult:
    """Send fixed FP32 inputs to an add_sub model; with ``check`` a wrong answer raises AnswerMismatchError.

    ``batch`` sends shape [batch, 4] (for add_sub_batching); default is [4]. ``timeout_s`` as for ``infer``.
    """
    base0 = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    base1 = np.array([0.5, 0.25, 2.0, 8.0], dtype=np.float32)
    if batch is not None:
        base0 = np.stack([base0 + i for i in range(batch)])
        base1 = np.stack([base1] * batch)
    out = infer(
        server,
        model,
        {"INPUT0": base0, "INPUT1": base1},
        ["OUTPUT0", "OUTPUT1"],
        protocol=protocol,
        client=client,
        timeout_s=timeout_s,
    )
    result = AddSubResult(model, protocol, base0, base1, out["OUTPUT0"], out["OUTPUT1"])
    if check and not result.ok:
        raise AnswerMismatchError(model=model, answered=result.summary(), remedy="Check execute() in its model.py")
    return result


@dataclass
class PassthroughResult:
    """Requests to a passthrough model (minimal, recommended, custom): did each get its input back?"""

    model: str
    protocol: str
    requests: int
    ok: bool

    def __repr__(self) -> str:
        return f"{self.model} over {self.protocol}: {self.requests} request(s), {'ok' if self.ok else 'WRONG'}"


def check_passthrough(
    server: TritonServer,
    model: str,
    protocol: str = "http",
    *,
    concurrent: int = 1,
    check: bool = True,
    timeout_s: float | None = None,
) -> PassthroughResult:
    """Send ``concurrent`` requests at once (one client each) to a reference passthrough model and
    check every answer equals its input. Two at once to a batching model lets Triton batch them.
    ``timeout_s`` as for ``infer``."""
    config = server.model_config(model)
    # A passthrough returns input k as output k.
    pairs = dict(zip((i["name"] for i in config.get("input", [])), (o["name"] for o in config.get("output", []))))
    sample = reference.sample_inputs(model, server=server)
    sent = [{k: v + index for k, v in sample.items()} for index in range(concurrent)]
    answers = infer_together(server, model, sent, [pairs[k] for k in sample], protocol=protocol, timeout_s=timeout_s)
    right = [all(np.array_equal(out[pairs[k]], v) for k, v in inputs.items()) for inputs, out in zip(sent, answers)]
    result = PassthroughResult(model, protocol, concurrent, all(right))
    if check and not result.ok:
        raise AnswerMismatchError(
            model=model, answered=str(result), expected="its input unchanged", remedy="check execute() in its model.py"
        )
    return result
