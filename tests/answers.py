"""Answers to exercises written as edits of their shipped cells, for the corpus tests."""

from __future__ import annotations

from labkit.exercises import REGISTRY


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
