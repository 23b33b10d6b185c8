"""What every lesson's ``run(server)`` returns, so one loop (labkit.course.tour) can run them all."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from matplotlib.figure import Figure


@dataclass
class Outcome:
    """ok: the lesson's claim held on this server; record: the numbers behind it (the demo's JSON);
    figure: a picture of it, for lessons that have one."""

    ok: bool
    record: dict[str, Any] = field(default_factory=dict)
    figure: Figure | None = None
