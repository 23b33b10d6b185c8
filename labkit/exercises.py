"""The exercises under the name the notebooks use (``labkit.exercises.check("01-output2", lab)``,
``from labkit.exercises import nb12``): labkit.course.exercises' names, the same objects. The course's code
imports them from there."""

from typing import Any

from .course import exercises as _exercises
from .course.exercises import (
    REGISTRY as REGISTRY,
    TAG_PREFIX as TAG_PREFIX,
    Exercise as Exercise,
    NotYet as NotYet,
    Verdict as Verdict,
    __all__ as __all__,
    check as check,
    checks_of as checks_of,
    exercise as exercise,
    require_latest as require_latest,
)


def __getattr__(name: str) -> Any:
    """The check modules and CHECKS, imported when first named (see labkit.course.exercises)."""
    return getattr(_exercises, name)
