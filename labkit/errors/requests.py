"""Requests: refused, malformed, timed out, or answered wrongly."""

from __future__ import annotations

from collections.abc import Sequence

from .root import LabkitError, block, mention, sentence


def _listed(items: Sequence[object], empty: str = "none") -> str:
    return ", ".join(map(str, items)) or empty


class InferenceError(LabkitError):
    """A request to ``model`` failed: it ``happened`` (a few words: "failed", "failed before it could be
    cancelled"). ``reason``: Triton's (or the backend's) own words for the failure, or why labkit refused,
    when there are such words; else empty. ``detail``: more that explains it (how a stub ended);
    ``stack``: where the model's code is, when labkit read it."""

    def __init__(
        self,
        *,
        model: str = "",
        reason: str = "",
        stack: str = "",
        happened: str = "failed",
        detail: str = "",
        remedy: str = "",
    ) -> None:
        self.model = model
        self.reason = reason
        self.stack = stack
        self.happened = happened
        self.detail = detail
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        text = f"The request to {self.model!r} {self.happened}" if self.model else f"The request {self.happened}"
        return f"{text}: {self.reason}" if self.reason and self.reason not in text and not block(self.reason) else text

    def _blocks(self) -> list[tuple[str, str]]:
        return [("Triton said", block(self.reason)), ("more", self.detail), ("where the model's code is", self.stack)]


class ModelNotFoundError(InferenceError):
    """The request named a model that is not loaded; ``loaded`` lists those that are. ``output``: the
    words of the tool that found it (perf_analyzer's), if any."""

    def __init__(self, *, model: str, loaded: Sequence[str] = (), output: str = "") -> None:
        self.loaded = list(loaded)
        self.output = output
        super().__init__(model=model, remedy=f"Load it with server.load({model!r})")

    def _headline(self) -> str:
        return f"Model {self.model!r} is not loaded (loaded: {_listed(self.loaded)})"

    def _blocks(self) -> list[tuple[str, str]]:
        return [("perf_analyzer said", self.output)]


class RequestError(InferenceError):
    """Triton (or labkit, before sending: ``refused_by``) rejected the request's inputs (name, datatype or shape).

    ``reason`` is Triton's words; ``expected`` and ``sent`` describe the model's inputs and the request's;
    ``differs`` lists what differs, one item per input ("INPUT0 is INT32, the model takes FP32").
    """

    def __init__(
        self,
        *,
        model: str,
        reason: str = "",
        expected: str = "",
        sent: str = "",
        differs: Sequence[str] = (),
        refused_by: str = "triton",
        remedy: str = "",
    ) -> None:
        self.expected = expected
        self.sent = sent
        self.differs = list(differs)
        self.refused_by = refused_by
        super().__init__(model=model, reason=reason, remedy=remedy)

    def _headline(self) -> str:
        if self.refused_by == "labkit":
            text = f"The request to {self.model!r} was not sent"
        else:
            text = f"Triton ({self.refused_by}) rejected the request to {self.model!r}"
            text = text.replace("Triton (triton)", "Triton")
        return f"{text}: {self.reason}" if self.reason else text

    def _compose(self) -> str:
        lines = [
            f"  what differs:      {'; '.join(self.differs)}" if self.differs else "",
            f"  the model expects: {self.expected}" if self.expected else "",
            f"  the request sent:  {self.sent}" if self.sent else "",
        ]
        remedy = sentence(self.remedy.strip())
        if remedy and remedy[-1] not in ".)`":
            remedy += "."
        return "\n".join(line for line in [self._headline(), *lines, remedy] if line)


class InputSizeError(RequestError):
    """An input's data does not fill the shape it declares (``declared``: its shape and datatype; ``needed``
    vs ``carried`` ``unit``: bytes, or strings for BYTES; ``carried`` -1: a cut-off list); refused before it
    was sent, since Triton 23.12 passes such a request to the backend, and a Python stub asked for more
    bytes than came can die of it."""

    def __init__(self, *, model: str, input: str, needed: int, carried: int, unit: str, declared: str = "") -> None:
        self.input = input
        self.needed = needed
        self.carried = carried
        self.unit = unit
        self.declared = declared
        super().__init__(
            model=model,
            expected=f"{input}: {needed} {unit}",
            sent=f"{input}: {carried} {unit}",
            refused_by="labkit",
            remedy="Build the input from the numpy array you mean to send",
        )

    def _headline(self) -> str:
        carried = self.carried if self.carried >= 0 else "a cut-off list of"
        shape = f" declares {self.declared}, which" if self.declared else ""
        return (
            f"Input {self.input!r} of the request to {self.model!r}{shape} needs {self.needed} {self.unit}, and "
            f"carries {carried} {self.unit}; nothing was sent"
        )

    def _compose(self) -> str:
        return LabkitError._compose(self)


class OutputNameError(InferenceError):
    """An output was asked for, or declared in the config (``asked``: by the request), and the answer lacks
    it: a misspelled name in the request or in the model's ``pb_utils.Tensor(NAME, ...)``. ``missing``:
    those names; ``outputs``: the model's outputs by its config; ``produced``: what the answer carried."""

    def __init__(
        self,
        *,
        model: str,
        missing: Sequence[str],
        outputs: Sequence[str],
        produced: Sequence[str] = (),
        asked: bool = True,
    ) -> None:
        self.missing = list(missing)
        self.outputs = list(outputs)
        self.produced = list(produced)
        self.asked = asked
        super().__init__(
            model=model, remedy="Check the spelling in the request and in model.py's pb_utils.Tensor(NAME, ...)"
        )

    def _headline(self) -> str:
        where = "the request asked for" if self.asked else "the config declares"
        none = "none by that name" if len(self.missing) == 1 else "none by those names"
        return (
            f"{where} output(s) {', '.join(map(repr, self.missing))} of {self.model!r}, and the answer has {none}. "
            f"{self.model!r}'s outputs are: {_listed(self.outputs)} (the answer carried: "
            f"{_listed(self.produced, 'nothing')})"
        )


class RequestTimeoutError(InferenceError):
    """A request to ``model`` got no answer within ``limit_s`` seconds. ``stack`` is where the model
    was stuck (its code's frames, innermost last), when labkit could read it; else empty.
    ``restart_needed``: only a restart ends it (a thread inside Triton, a C++ backend); else
    ``lab.unstick(model)`` can. ``reason``: why the wait ended without an answer beyond the time
    limit, when there is more to say (a stream that sent no final flag)."""

    def __init__(
        self,
        *,
        model: str,
        limit_s: float,
        stack: str = "",
        restart_needed: bool = False,
        reason: str = "",
        remedy: str = "",
    ) -> None:
        self.limit_s = limit_s
        self.restart_needed = restart_needed
        super().__init__(model=model, reason=reason, stack=stack, remedy=remedy)

    def _headline(self) -> str:
        text = f"The request to {self.model!r} got no answer within {self.limit_s:g} s"
        return self._tail(f"{text}. {self.reason}" if self.reason else text)

    def _tail(self, text: str) -> str:
        if self.restart_needed:
            text += "; only a restart ends it (the model is stuck inside Triton)"
        return text

    def _blocks(self) -> list[tuple[str, str]]:
        return [("where the model was (live stack)", self.stack)]


class RequestInterruptedError(RequestTimeoutError):
    """A kernel interrupt (Ctrl-C, the notebook's stop button) ended the wait for ``model`` after
    ``waited_s`` seconds, before the time limit; ``stack`` is where the model was at that moment."""

    def __init__(
        self,
        *,
        model: str,
        limit_s: float,
        waited_s: float,
        stack: str = "",
        restart_needed: bool = False,
        remedy: str = "",
    ) -> None:
        self.waited_s = waited_s
        super().__init__(model=model, limit_s=limit_s, stack=stack, restart_needed=restart_needed, remedy=remedy)

    def _headline(self) -> str:
        return self._tail(
            f"You interrupted the request to {self.model!r} after {self.waited_s:.1f} s (its limit: {self.limit_s:g} s)"
        )


class RequestDroppedError(InferenceError):
    """Triton released the request to ``model`` without an answer, and said so in its log: no answer will
    come, however long the client waits. ``reason`` is Triton's log line; ``needs`` what the model's config
    lacks (``sequence_batching { iterative_sequence: true }`` for a request its model rescheduled)."""

    def __init__(self, *, model: str, reason: str, needs: str) -> None:
        self.needs = needs
        super().__init__(
            model=model,
            reason=reason,
            remedy=(
                f"A model reschedules requests only with `{needs}` in its config.pbtxt (python_backend README, "
                f"r23.12, 'Request Rescheduling'): add it and load {model!r} again"
            ),
        )

    def _headline(self) -> str:
        return (
            f"The request to {self.model!r} will never be answered: its model released it with "
            f"TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, and Triton refused ({self.reason!r}) and dropped it"
        )


class SequenceError(InferenceError):
    """Triton refused a request to a model with sequence batching for what the sequence batcher needs.
    ``problem``: "no-sequence-id" (the request carried no sequence id) or "rows" (it carried ``rows``,
    more than one batch row: each request is one step of its sequence); ``sequence_id`` as sent (0: none)."""

    _SAID = {
        "no-sequence-id": (
            "{model!r} is a stateful model (its config has sequence_batching): every request must say which "
            "sequence it belongs to",
            "Pass sequence_id=<a number or string of your choice>, with sequence_start=True on its first "
            "request and sequence_end=True on its last",
        ),
        "rows": (
            "The request to {model!r} carries {rows} rows, and a stateful model takes one per request: each "
            "request is one step of its sequence",
            "Send the rows as successive requests of the sequence",
        ),
    }

    def __init__(
        self, *, model: str, sequence_id: int | str = 0, problem: str, rows: int = 0, reason: str = ""
    ) -> None:
        self.sequence_id, self.problem, self.rows = sequence_id, problem, rows
        super().__init__(model=model, reason=reason, remedy=self._SAID[problem][1])

    def _headline(self) -> str:
        text = self._SAID[self.problem][0].format(model=self.model, rows=self.rows)
        text = mention(text, "rows: ", self.rows)
        return text + (f" (sequence_id {self.sequence_id!r})" if self.sequence_id else "")

    def _blocks(self) -> list[tuple[str, str]]:
        return [("Triton said", self.reason)]


class AnswerMismatchError(InferenceError):
    """``model`` answered, but not with the expected values: it ``answered`` (what it gave), not ``expected``."""

    def __init__(self, *, model: str, answered: str, expected: str = "", remedy: str = "") -> None:
        self.answered, self.expected = answered, expected
        reason = f"answered {answered}" + (f", not {expected}" if expected else "")
        super().__init__(model=model, reason=reason, remedy=remedy)

    def _headline(self) -> str:
        text = (
            f"{self.model} answered {self.answered}" if not block(self.answered) else f"{self.model} answered wrongly"
        )
        return text + (f", not {self.expected}" if self.expected else "")

    def _blocks(self) -> list[tuple[str, str]]:
        return [("its answer", block(self.answered))]


class SharedMemoryError(InferenceError):
    """A request to a Python model needs more shared memory than ``/dev/shm`` has left where Triton runs:
    ``needed_bytes`` (its inputs), ``free_bytes`` (left) of ``total_bytes``, ``shm_size`` (the Docker server's
    ``shm_size=`` option, "" for the embedded server); ``reason``: Triton's words."""

    def __init__(
        self,
        *,
        needed_bytes: int,
        free_bytes: int,
        total_bytes: int = 0,
        shm_size: str = "",
        model: str = "",
        reason: str = "",
        remedy: str = "",
    ) -> None:
        self.needed_bytes, self.free_bytes, self.total_bytes, self.shm_size = (
            needed_bytes,
            free_bytes,
            total_bytes,
            shm_size,
        )
        super().__init__(model=model, reason=reason, remedy=remedy)

    def _headline(self) -> str:
        total = f" of {_mib(self.total_bytes)}" if self.total_bytes else ""
        text = (
            f"The request to {self.model!r} failed: its inputs need {_mib(self.needed_bytes)} of shared memory to "
            f"reach the Python stub, and /dev/shm where Triton runs has {_mib(self.free_bytes)} left{total}"
        )
        return text + (f" (shm_size={self.shm_size!r})" if self.shm_size else "")

    def _blocks(self) -> list[tuple[str, str]]:
        return [("Triton said", self.reason)]


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB ({n} bytes)"
