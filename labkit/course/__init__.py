"""The course around the lab, one wing: at its bottom the exercise catalogue (``catalogue``: each exercise
as data, the Verdict and the tag prefix; it imports no other labkit module, and the room reads only it) and
the reference models and their checks (``reference``, ``checks``), which every other part uses; then the
lessons (``lessons/``), the exercises (``exercises/``), the notebook runner and the workshop's commands (``workshop``), the day's schedule
(``schedule``, ``lesson_time``), the tour of every lesson (``tour``) and the site's lesson pages
(``lesson_pages``). ``__all__`` names the modules other wings use."""

__all__ = [
    "catalogue",
    "checks",
    "exercises",
    "lesson_pages",
    "lesson_time",
    "lessons",
    "reference",
    "schedule",
    "tour",
    "workshop",
]
