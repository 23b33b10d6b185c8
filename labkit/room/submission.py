"""What a grader judges: the exercise cells of one participant's saved notebook, read as JSON and never
run where they are read. The board hands a Submission to a grader (a Docker container, a Kubernetes Pod)
through one environment variable, so a grader needs no view of the participant's files.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SubmissionError
from ..exercises import REGISTRY, TAG_PREFIX

ENV = "LABKIT_SUBMISSION"
MAX_ENCODED = 96 * 1024  # Linux caps one environment string at 128 KiB (MAX_ARG_STRLEN)


def exercise_cells(notebook: Mapping[str, Any]) -> dict[str, str]:
    """``{exercise id: source}`` of a notebook's cells tagged ``exercise:<id>`` (a notebook as JSON)."""
    cells: dict[str, str] = {}
    for cell in notebook.get("cells", []) if isinstance(notebook, Mapping) else []:
        if not isinstance(cell, Mapping):
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        for tag in (cell.get("metadata") or {}).get("tags", []) or []:
            if isinstance(tag, str) and tag.startswith(TAG_PREFIX):
                cells[tag[len(TAG_PREFIX) :]] = text
    return cells


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

    @property
    def untouched(self) -> bool:
        """Every exercise cell is still as shipped: nothing to run, every exercise "not started"."""
        return not any(is_started(e, s) for e, s in self.cells.items())

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
