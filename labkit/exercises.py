"""The exercises under the name the notebooks use (``labkit.exercises.check("01-output2", lab)``,
``from labkit.exercises import nb12``): labkit.course.exercises' names, the same objects. The course's code
imports them from there."""

from .course.exercises import *  # noqa: F403 - its __all__ is this module's surface
from .course.exercises import __all__ as __all__
