"""Requests: refused, malformed, timed out, or answered wrongly."""

from __future__ import annotations

from collections.abc import Sequence

from .root import LabkitError


class InferenceError(LabkitError):
    """A request to ``model`` failed. ``reason``: Triton's (or the backend's) own words for the
    failure, or why labkit refused, when there are such words; else empty."""

    def __init__(self, message: str, *, model: str = "", reason: str = "", stack: str = "") -> None:
        self.model = model
        self.reason = reason
        self.stack = stack  # where the model's code is, when labkit read it
        super().__init__(message)


class ModelNotFoundError(InferenceError):
    """The request named a model that is not loaded; ``loaded`` lists those that are. Without a
    message, it says which are loaded and how to load this one."""

    def __init__(self, message: str = "", *, model: str, loaded: Sequence[str] = ()) -> None:
        self.loaded = list(loaded)
        super().__init__(
            message
            or f"Model {model!r} is not loaded (loaded: {', '.join(self.loaded) or 'none'}). "
            f"Load it with server.load({model!r}).",
            model=model,
        )


class RequestError(InferenceError):
    """Triton rejected the request's inputs (name, datatype or shape).

    ``reason`` is Triton's words; ``expected`` and ``sent`` describe the model's inputs and the request's;
    ``differs`` lists what differs, one item per input ("INPUT0 is INT32, the model takes FP32").
    """

    def __init__(
        self,
        message: str,
        *,
        model: str,
        reason: str = "",
        expected: str = "",
        sent: str = "",
        differs: Sequence[str] = (),
    ) -> None:
        self.expected = expected
        self.sent = sent
        self.differs = list(differs)
        super().__init__(message, model=model, reason=reason)


class InputSizeError(RequestError):
    """An input's data does not fill the shape it declares (``needed`` vs ``carried`` ``unit``: bytes,
    or strings for BYTES); refused before it was sent, since Triton 23.12 passes such a request to the
    backend, and a Python stub asked for more bytes than came can die of it."""

    def __init__(self, message: str, *, model: str, input: str, needed: int, carried: int, unit: str) -> None:
        self.input = input
        self.needed = needed
        self.carried = carried
        self.unit = unit
        super().__init__(
            message, model=model, reason="", expected=f"{input}: {needed} {unit}", sent=f"{input}: {carried} {unit}"
        )


class OutputNameError(InferenceError):
    """An output was asked for, or declared in the config, and the answer lacks it: a misspelled name in
    the request or in the model's ``pb_utils.Tensor(NAME, ...)``. ``missing``: those names; ``outputs``:
    the model's outputs by its config; ``produced``: what the answer carried."""

    def __init__(
        self, message: str, *, model: str, missing: Sequence[str], outputs: Sequence[str], produced: Sequence[str] = ()
    ) -> None:
        self.missing = list(missing)
        self.outputs = list(outputs)
        self.produced = list(produced)
        super().__init__(message, model=model)


class RequestTimeoutError(InferenceError):
    """A request to ``model`` got no answer within ``limit_s`` seconds. ``stack`` is where the model
    was stuck (its code's frames, innermost last), when labkit could read it; else empty.
    ``restart_needed``: only a restart ends it (a thread inside Triton, a C++ backend); else
    ``lab.unstick(model)`` can. ``reason``: why the wait ended without an answer beyond the time
    limit, when there is more to say (a stream that sent no final flag)."""

    def __init__(
        self,
        message: str,
        *,
        model: str,
        limit_s: float,
        stack: str = "",
        restart_needed: bool = False,
        reason: str = "",
    ) -> None:
        self.limit_s = limit_s
        self.restart_needed = restart_needed
        super().__init__(message, model=model, reason=reason, stack=stack)


class RequestInterruptedError(RequestTimeoutError):
    """A kernel interrupt (Ctrl-C, the notebook's stop button) ended the wait for ``model`` after
    ``waited_s`` seconds, before the time limit; ``stack`` is where the model was at that moment."""

    def __init__(
        self,
        message: str,
        *,
        model: str,
        limit_s: float,
        waited_s: float,
        stack: str = "",
        restart_needed: bool = False,
    ) -> None:
        self.waited_s = waited_s
        super().__init__(message, model=model, limit_s=limit_s, stack=stack, restart_needed=restart_needed)


class RequestDroppedError(InferenceError):
    """Triton released the request to ``model`` without an answer, and said so in its log: no answer will
    come, however long the client waits. ``reason`` is Triton's log line; ``needs`` what the model's config
    lacks (``sequence_batching { iterative_sequence: true }`` for a request its model rescheduled)."""

    def __init__(self, message: str, *, model: str, reason: str, needs: str) -> None:
        self.needs = needs
        super().__init__(message, model=model, reason=reason)


class SequenceError(InferenceError):
    """Triton refused a request to a model with sequence batching for what the sequence batcher needs.
    ``problem``: "no-sequence-id" (the request carried no sequence id) or "rows" (it carried more than
    one batch row: each request is one step of its sequence); ``sequence_id`` as sent (0: none)."""

    def __init__(self, message: str, *, model: str, sequence_id: int | str = 0, problem: str, reason: str = "") -> None:
        self.sequence_id, self.problem = sequence_id, problem
        super().__init__(message, model=model, reason=reason)


class AnswerMismatchError(InferenceError):
    """A model answered, but not with the expected values."""


class SharedMemoryError(InferenceError):
    """A request to a Python model needs more shared memory than ``/dev/shm`` has left where Triton runs:
    ``needed_bytes`` (its inputs), ``free_bytes`` (left), ``shm_size`` (the Docker server's ``shm_size=``
    option, "" for the embedded server)."""

    def __init__(
        self,
        message: str,
        *,
        needed_bytes: int,
        free_bytes: int,
        shm_size: str = "",
        model: str = "",
        reason: str = "",
    ) -> None:
        self.needed_bytes, self.free_bytes, self.shm_size = needed_bytes, free_bytes, shm_size
        super().__init__(message, model=model, reason=reason)
