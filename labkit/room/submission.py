"""What a grader judges: the exercise cells of one participant's saved notebook, read as JSON and never
run where they are read (an exercise whose tag is on two cells is not judged: it is "not yet", saying so). The board hands a Submission to a grader (a Docker container, a Kubernetes Pod)
through one environment variable, so a grader needs no view of the participant's files.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..course.exercises import REGISTRY, TAG_PREFIX
from ..errors import SubmissionError

ENV = "LABKIT_SUBMISSION"
MAX_ENCODED = 96 * 1024  # Linux caps one environment string at 128 KiB (MAX_ARG_STRLEN)


def submission_of(user: str, notebook: str, content: object) -> Submission:
    """``user``'s saved ``notebook`` (its JSON, parsed) as a Submission: the sources of its cells tagged
    ``exercise:<id>``. An id tagged on more than one cell is left out of the cells and named in
    ``duplicated`` (which cell is the answer cannot be told). SubmissionError "unreadable" when the JSON is
    not a notebook."""
    if not isinstance(content, Mapping) or not isinstance(content.get("cells"), list):
        raise SubmissionError(
            f"{user}'s {notebook} is not a notebook (its JSON holds no list of cells); it is judged again at its "
            "next save.",
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
    return Submission(user, notebook, cells, duplicated=duplicated)


def duplicated_problem(exercise: str) -> str:
    """What a participant reads when an exercise's tag is on more than one of their cells."""
    return (
        f"the tag {TAG_PREFIX}{exercise} is on two cells or more: keep it on your answer's cell only (remove it "
        "from the copy in the cell's Property Inspector, or delete the copy) and save again."
    )


def is_started(exercise: str, source: str) -> bool:
    """Whether a cell differs from the starter the notebook shipped with (an unknown exercise: started)."""
    known = REGISTRY.get(exercise)
    return known is None or source.strip() != known.starter().strip()


@dataclass(frozen=True)
class Submission:
    """``user``'s ``notebook`` (its path in their work folder) as saved: its exercise cells. ``judge``: the
    exercises to judge (their cells changed since their last verdict); empty: every started one."""

    user: str
    notebook: str
    cells: dict[str, str] = field(default_factory=dict)
    judge: tuple[str, ...] = ()
    duplicated: tuple[str, ...] = ()  # exercises tagged on more than one cell: not in ``cells``, never run

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
                f"{self.user}'s {self.notebook}: its exercise cells are {len(text)} bytes once packed, more than "
                f"the grader takes ({MAX_ENCODED}); ask them to move large data out of the exercise cells.",
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
                f"The grader's {ENV} is not a submission ({exc}); the board writes it, so "
                "check that the board and the grader image run the same labkit.",
                problem="not-a-submission",
            ) from None
