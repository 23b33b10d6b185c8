"""Exercises with automatic checks, one module per notebook (nbNN.py); starters and reference solutions
of the "your turn" cells in ``cells/`` (the solutions stay out of the notebooks). What each exercise is (its
id, notebook, title and hint) is data in labkit.course.catalogue; each check module registers its checks
against the catalogue's ids (``CHECKS``).

    verdict = labkit.exercises.check("01-output2", lab)   # in the notebook's check cell
    verdict                                               # passed, or not yet: what is wrong. Hint: ...

``labkit workshop check`` runs the notebooks and collects every verdict (see labkit.course.workshop).
"""

from ..catalogue import REGISTRY, TAG_PREFIX, Exercise, Verdict
from . import nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb09_ensemble, nb09_state, nb11, nb12, nb15, nb17, nb18
from .core import CHECKS, NotYet, check, exercise, require_latest

__all__ = [
    "CHECKS",
    "REGISTRY",
    "TAG_PREFIX",
    "Exercise",
    "NotYet",
    "Verdict",
    "check",
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
