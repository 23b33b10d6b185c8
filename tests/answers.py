"""Answers to exercises written as edits of their shipped cells, and how the corpus tests judge them."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from labkit import exercises
from labkit.course.exercises import REGISTRY, sanitized
from labkit.server.base import current


def body(exercise_id: str, kind: str = "solution") -> str:
    """The shipped cell (``solution`` or ``starter``) without its magic line."""
    cell = REGISTRY[exercise_id].starter() if kind == "starter" else REGISTRY[exercise_id].solution()
    return cell.split("\n", 1)[1]


def edit(exercise_id: str, *changes: tuple[str, str], kind: str = "solution") -> str:
    """The shipped cell with each ``(old, new)`` replaced; ``old`` must be there."""
    text = body(exercise_id, kind)
    for old, new in changes:
        assert old in text, f"{exercise_id}: {old!r} is not in the {kind}"
        text = text.replace(old, new)
    return text


def state(lab) -> tuple:
    """What a notebook can see of the server: the repository's models and files, the index, what is loaded,
    the magics' server, and the sanitized checks' folders."""
    files = {p: p.read_bytes() for p in lab.repository.root.rglob("*") if p.is_file() and p.suffix != ".so"}
    index = sorted({m["name"] for m in lab.models.index()})  # names only: old versions of a rebuild finish unloading
    return (
        files,
        index,
        lab.loaded_models(),
        current() is lab,
        # this process's only: a check running at the same time in another test worker makes folders of its own
        sorted(Path(tempfile.gettempdir()).glob(f"{sanitized.FOLDER_PREFIX}{os.getpid()}-*")),
    )


def judge(lab, exercise_id: str, serve: Callable[[], object], expected_rule: str | None) -> None:
    """Serve an answer, check it, and assert the verdict (passed, or failed by ``expected_rule``) and that
    the check left nothing behind."""
    serve()
    before = state(lab)
    verdict = exercises.check(exercise_id, lab)
    assert verdict.passed == (expected_rule is None), repr(verdict)
    after = state(lab)
    assert after == before, f"the check left something behind: {_changes(before, after)}"
    assert verdict.rule == (expected_rule or ""), repr(verdict)


def _changes(before: tuple, after: tuple) -> str:
    """What differs between two states, by part (files by path), so that a failure says what was left."""
    names = ("files", "index", "loaded", "magics' server", "sanitized folders")
    said = []
    for name, old, new in zip(names, before, after):
        if old == new:
            continue
        if name == "files":
            changed = sorted(str(p) for p in set(old) | set(new) if old.get(p) != new.get(p))
            said.append(f"files {changed[:5]}")
        else:
            said.append(f"{name} {old!r} -> {new!r}")
    return "; ".join(said)
