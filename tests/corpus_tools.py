"""What the answer corpora (corpus_a, corpus_a_transfer, corpus_compare) write their answers with: the reference
cells, one edit of them, and a cell that does not compile."""

from __future__ import annotations

from labkit.course.exercises import REGISTRY

RIGHT, WRONG = True, False


def solution(exercise: str) -> str:
    return REGISTRY[exercise].solution()


def starter(exercise: str) -> str:
    return REGISTRY[exercise].starter()


def edit(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` (which must be there: a corpus entry that edits nothing is a defect)."""
    assert old in text, old
    return text.replace(old, new)


def broken(cell: str) -> str:
    """The cell with a syntax error (Python) or a compile error (C++) added at its end."""
    return cell + ("\n  this does not compile;\n" if "%%triton_cpp" in cell else "\n    def oops(:\n")
