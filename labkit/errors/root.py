"""The root of the hierarchy, and what the machine lacks (set-up, a GPU, the Docker engine).

Every class composes its text from its fields, as docker-py's ``APIError.__str__`` does: ``_headline``
(what happened, about what, and why, on the first line), then ``remedy`` (what to do next), then
``_blocks`` (a tool's own long words, each under a ``--- label ---`` line). Fields may hold free
text (a tool's words, a remedy sentence); the shape of the message is the class's."""

from __future__ import annotations

from typing import Any


def sentence(text: str) -> str:
    """``text`` with a capital first letter (when it starts with a lower-case word)."""
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def said(text: str, words: str) -> str:
    """``text`` with a tool's short ``words`` in parentheses; several lines go to a block instead."""
    return f"{text} ({words})" if words and "\n" not in words and len(words) <= 300 else text


def block(words: str) -> str:
    """``words`` when they belong in a block of their own (several lines, or long), else ""."""
    return words if words and ("\n" in words or len(words) > 300) else ""


def mention(text: str, label: str, value: object) -> str:
    """``text``, with ``value`` added in parentheses when it is given and the text does not say it yet: no
    field given is left out of a message."""
    shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return f"{text} ({label}{shown})" if value not in (None, "", 0, []) and shown not in text else text


def _rebuild(cls: type[LabkitError], state: dict[str, Any], args: tuple[Any, ...]) -> LabkitError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    error.args = args
    return error


class LabkitError(Exception):
    """Base class of every error labkit raises; never raised itself (each case has its class)."""

    remedy: str

    def __init__(self, *, remedy: str = "") -> None:
        self.remedy = remedy
        super().__init__(self._compose())

    def _headline(self) -> str:
        """What happened, about what, and why: the first line, from the fields."""
        return type(self).__name__

    def _blocks(self) -> list[tuple[str, str]]:
        """(label, text) of a tool's own long words (a log tail, compiler output), shown after the remedy."""
        return []

    def _compose(self) -> str:
        text = self._headline().strip()  # as the class wrote it: it may begin with a name ("m loaded")
        remedy = self.remedy.strip()
        if remedy and remedy not in text:
            text = text.rstrip(".") + ("; " if remedy[:1].islower() else ". ") + remedy
            if text[-1] not in ".!?)`\n":
                text += "."  # a remedy is a sentence; a headline alone may end in a tool's own words
        for label, words in self._blocks():
            if words:
                text += f"\n--- {label} ---\n{words.rstrip()}"
        return text

    def __str__(self) -> str:
        return self._compose()  # again: a field set after construction (e.g. ``serving``) shows too

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only constructors: rebuild from the fields, not from args
        return (_rebuild, (type(self), dict(self.__dict__), self.args))


class SetupError(LabkitError):
    """The machine or environment lacks something Triton needs (files, a Python, a library).
    ``missing``: what is missing (an image name, a file, "Docker engine"), when known; ``reason``: why,
    in a few fixed words ("pull failed", "invalid image name", "not pulled", "unreachable", ...);
    ``needed_by``: what needs it ("perf_analyzer"), when that is worth saying; ``detail``: the tool's or
    the system's own words; ``remedy``: what to do next."""

    def __init__(
        self,
        *,
        missing: str = "",
        reason: str = "",
        needed_by: str = "",
        detail: str = "",
        remedy: str = "",
    ) -> None:
        self.missing = missing
        self.reason = reason
        self.needed_by = needed_by
        self.detail = detail
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        what = self.missing or "something"
        text = f"{self.needed_by} needs {what}" if self.needed_by else what
        text += f": {self.reason}" if self.reason else (" is missing" if not self.needed_by else "")
        return said(text, self.detail)

    def _blocks(self) -> list[tuple[str, str]]:
        return [("what it said", block(self.detail))]


class GpuUnavailableError(SetupError):
    """``wanted`` (a KIND_GPU model, CUDA shared memory, a CUDA build's kernel) needs a GPU or CUDA
    that this machine lacks; ``reason`` says what was seen ("no /dev/nvidia0 and no nvidia-smi", ...)."""

    def __init__(
        self, *, missing: str = "GPU", reason: str = "", wanted: str = "", detail: str = "", remedy: str = ""
    ) -> None:
        self.wanted = wanted
        super().__init__(missing=missing, reason=reason, needed_by=wanted, detail=detail, remedy=remedy)


class EngineError(LabkitError):
    """The Docker engine refused or failed an operation: ``doing`` what (e.g. "remove container c"),
    ``status_code`` its HTTP status (0 if none), ``detail`` its own words, ``remedy`` what to do next."""

    def __init__(self, *, status_code: int = 0, doing: str = "", detail: str = "", remedy: str = "") -> None:
        self.status_code = status_code
        self.doing = doing
        self.detail = detail
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        text = f"The Docker engine could not {self.doing or 'do what labkit asked'}"
        if self.status_code:
            text += f" (HTTP {self.status_code})"
        return f"{text}: {self.detail}" if self.detail and not block(self.detail) else text

    def _blocks(self) -> list[tuple[str, str]]:
        return [("what the engine said", block(self.detail))]
