"""The stateful lesson in a Triton container (labkit's offline CPU image): the Python model's control inputs
with Debian's numpy, and the C++ accumulate backend compiled in the container, keep interleaved sequences
apart over HTTP and gRPC, and every sequence keeps one batch slot under load."""

from __future__ import annotations

import pytest

from labkit.course.lessons import stateful

pytestmark = pytest.mark.slow


def test_stateful_lesson_in_the_cpu_image(dserver):
    outcome = stateful.run(dserver)
    assert outcome.ok, outcome.record
    assert len(outcome.record) == 5
