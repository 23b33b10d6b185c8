"""Everything that crosses a room's process boundaries, in one place: the Submission the board hands a grader
(a saved notebook's exercise cells, read as JSON and never run where they are read; an exercise whose tag is
on two cells is not judged but "not yet", saying so), passed in one environment variable so that a grader
needs no view of the participant's files; the verdict JSON a grader answers with (its result line, a Pod's
termination message), read back here whatever the other side wrote; the marks that frame them in a
container's output and the files of a warm grader's inbox; and the labels the room's containers, networks
and volumes carry.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..course.catalogue import TAG_PREFIX, Verdict, exercises_of, hint_of, is_started
from ..errors import SubmissionError

ENV = "LABKIT_SUBMISSION"
RESULT_MARK = "LABKIT-GRADER-RESULT "
WARM_MARK = "LABKIT-GRADER-WARM"  # a warm grader's kernel is up: only its submission is awaited
INBOX = "/tmp/labkit-inbox"  # where the board puts a warm grader's submission
SUBMISSION_FILE, READY_FILE = "submission", "ready"
ROLE_LABEL = "labkit.room.role"
ROOM_LABEL = "labkit.room"  # every container, network and volume of a room carries it (value: the room's id)
WORK_LABEL = "labkit.room.work"  # participants' volumes: kept by `room down`, so not under ROOM_LABEL
MAX_ENCODED = 96 * 1024  # Linux caps one environment string at 128 KiB (MAX_ARG_STRLEN)


def submission_of(user: str, notebook: str, content: object, saved: bytes = b"") -> Submission:
    """``user``'s saved ``notebook`` (its JSON, parsed) as a Submission: the sources of its cells tagged
    ``exercise:<id>``. An id tagged on more than one cell is left out of the cells and named in
    ``duplicated`` (which cell is the answer cannot be told). SubmissionError "unreadable" when the JSON is
    not a notebook."""
    if not isinstance(content, Mapping) or not isinstance(content.get("cells"), list):
        raise SubmissionError(
            detail="its JSON holds no list of cells",
            user=user,
            notebook=notebook,
            problem="unreadable",
        )
    found: dict[str, list[str]] = {}
    for cell in content["cells"]:
        if not isinstance(cell, Mapping):
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        for tag in (cell.get("metadata") or {}).get("tags", []) or []:
            if isinstance(tag, str) and tag.startswith(TAG_PREFIX):
                found.setdefault(tag[len(TAG_PREFIX) :], []).append(text)
    cells = {e: sources[0] for e, sources in found.items() if len(sources) == 1}
    duplicated = tuple(sorted(e for e, sources in found.items() if len(sources) > 1))
    return Submission(user, notebook, cells, duplicated=duplicated, saved=saved)


def duplicated_problem(exercise: str) -> str:
    """What a participant reads when an exercise's tag is on more than one of their cells."""
    return (
        f"the tag {TAG_PREFIX}{exercise} is on two cells or more: keep it on your answer's cell only (remove it "
        "from the copy in the cell's Property Inspector, or delete the copy) and save again."
    )


@dataclass(frozen=True)
class Submission:
    """``user``'s ``notebook`` (its path in their work folder) as saved: its exercise cells. ``judge``: the
    exercises to judge (their cells changed since their last verdict); empty: every started one."""

    user: str
    notebook: str
    cells: dict[str, str] = field(default_factory=dict)
    judge: tuple[str, ...] = ()
    duplicated: tuple[str, ...] = ()  # exercises tagged on more than one cell: not in ``cells``, never run
    saved: bytes = field(default=b"", compare=False, repr=False)  # the whole file as read (the board keeps it)

    @property
    def untouched(self) -> bool:
        """Every exercise cell is still as shipped: nothing to run, every exercise "not started"."""
        return not self.duplicated and not any(is_started(e, s) for e, s in self.cells.items())

    def encode(self) -> str:
        """One environment-safe string (compressed JSON, base64); SubmissionError "too-large" past MAX_ENCODED."""
        data = json.dumps(
            {"user": self.user, "notebook": self.notebook, "cells": self.cells, "judge": list(self.judge)}
        ).encode()
        text = base64.b64encode(zlib.compress(data, 9)).decode()
        if len(text) > MAX_ENCODED:
            raise SubmissionError(
                detail=f"{len(text)} bytes once packed; the grader takes {MAX_ENCODED}",
                remedy="ask them to move large data out of the exercise cells",
                user=self.user,
                notebook=self.notebook,
                problem="too-large",
            )
        return text

    @classmethod
    def decode(cls, text: str) -> Submission:
        try:
            data = json.loads(zlib.decompress(base64.b64decode(text.encode(), validate=True)))
            return cls(
                str(data["user"]),
                str(data["notebook"]),
                {str(k): str(v) for k, v in data["cells"].items()},
                tuple(str(e) for e in data.get("judge", [])),
            )
        except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as exc:
            raise SubmissionError(
                detail=f"{ENV}: {exc}",
                remedy="the board writes it, so check that the board and the grader image run the same labkit",
                problem="not-a-submission",
            ) from None


@dataclass(frozen=True)
class RoomVerdict(Verdict):
    """A check's Verdict as the room passes it on, with what the room adds to it."""

    started: bool = True  # False: the cell is still its starter (nothing was judged)
    digest: str = ""  # of the cell judged ("" when the run could not judge it: judged again at the next save)

    @classmethod
    def of(cls, verdict: Verdict) -> RoomVerdict:
        return cls(**asdict(verdict))

    @classmethod
    def not_started(cls, exercise: str) -> RoomVerdict:
        """An exercise whose cell is as shipped, with its hint (what the board shows before any try)."""
        return cls(exercise, hint=hint_of(exercise), started=False)

    @classmethod
    def unjudged(cls, exercise: str, why: str) -> RoomVerdict:
        """ "Not yet", because the grader could not judge it (``why``)."""
        return cls(exercise, problem=why, hint=hint_of(exercise))

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


def untouched_results(notebook: str) -> list[RoomVerdict]:
    """The verdicts of a notebook whose exercise cells are all as shipped: every exercise not started."""
    return [RoomVerdict.not_started(e) for e in exercises_of(notebook)]


def not_started(notebook: str, cells: Mapping[str, str]) -> list[RoomVerdict]:
    """The "not started" verdicts of ``notebook``'s exercises whose cell in ``cells`` is still its starter
    (an exercise without a cell there is not among them: it is judged, or said otherwise)."""
    return [
        r for r in untouched_results(notebook) if r.exercise in cells and not is_started(r.exercise, cells[r.exercise])
    ]
