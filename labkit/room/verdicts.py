"""A verdict as the room keeps it: an exercise's check (labkit.course.exercises.Verdict), whether its cell was
started, and the digest of the cell judged. It crosses the grader's boundary as JSON (the result line, a
Pod's termination message) and is read back here, whatever the other side wrote."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..course.exercises import REGISTRY, Verdict


@dataclass(frozen=True)
class RoomVerdict:
    exercise: str
    passed: bool = False
    problem: str = ""
    hint: str = ""
    rule: str = ""
    started: bool = True  # False: the cell is still its starter (nothing was judged)
    digest: str = ""  # of the cell judged ("" when the run could not judge it: judged again at the next save)

    @classmethod
    def of(cls, verdict: Verdict) -> RoomVerdict:
        return cls(verdict.exercise, verdict.passed, verdict.problem, verdict.hint, verdict.rule)

    @classmethod
    def not_started(cls, exercise: str) -> RoomVerdict:
        """An exercise whose cell is as shipped, with its hint (what the board shows before any try)."""
        return cls(exercise, hint=REGISTRY[exercise].hint if exercise in REGISTRY else "", started=False)

    @classmethod
    def unjudged(cls, exercise: str, why: str) -> RoomVerdict:
        """ "Not yet", because the grader could not judge it (``why``)."""
        return cls(exercise, problem=why, hint=REGISTRY[exercise].hint if exercise in REGISTRY else "")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RoomVerdict:
        """Known keys only, as their types; ValueError when there is no exercise."""
        if not isinstance(data, dict) or not data.get("exercise"):
            raise ValueError(f"not a verdict: {str(data)[:200]}")
        return cls(
            str(data["exercise"]),
            bool(data.get("passed")),
            str(data.get("problem") or ""),
            str(data.get("hint") or ""),
            str(data.get("rule") or ""),
            bool(data.get("started", True)),
            str(data.get("digest") or ""),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
