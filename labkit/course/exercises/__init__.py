"""Exercises with automatic checks, one module per notebook (nbNN.py); starters and reference solutions
of the "your turn" cells in ``cells/`` (the solutions stay out of the notebooks). What each exercise is (its
id, notebook, title and hint) is data in labkit.course.catalogue; each check module registers its checks
against the catalogue's ids (``CHECKS``).

    verdict = labkit.exercises.check("01-output2", lab)   # in the notebook's check cell
    verdict                                               # passed, or not yet: what is wrong. Hint: ...

``labkit workshop check`` runs the notebooks and collects every verdict (see labkit.course.workshop).
"""

from typing import Any

from ..catalogue import REGISTRY, TAG_PREFIX, Exercise, Verdict
from .core import MODULES, NotYet, check, checks_of, exercise, require_latest

__all__ = [
    "CHECKS",
    "REGISTRY",
    "TAG_PREFIX",
    "Exercise",
    "NotYet",
    "Verdict",
    "check",
    "checks_of",
    "exercise",
    "require_latest",
    "nb01",
    "nb02",
    "nb03",
    "nb04",
    "nb05",
    "nb06",
    "nb07",
    "nb09_ensemble",
    "nb09_state",
    "nb11",
    "nb12",
    "nb15",
    "nb17",
    "nb18",
]


def __getattr__(name: str) -> Any:
    """The check modules (``nb01``, ...) and ``CHECKS`` (every module's checks) are imported when first named:
    ``check`` imports only its exercise's module (labkit.course.exercises.core.checks_of)."""
    if name in MODULES:
        checks_of(f"{name[2:4]}-")
        return globals()[name]  # the import of a submodule binds it here
    if name == "CHECKS":
        return checks_of()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
