"""The live dashboard's canvas: a frame blitted over the kept background shows what a frame drawn whole shows,
and the background is drawn anew only when an axis' limits or words change."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from labkit.observe.dashboard_canvas import TIME_STEPS, DashboardCanvas, rounded_up
from labkit.observe.plots import DashboardData, LatencyBins, Window
from labkit.observe.stats import ModelStats


def _data(seconds: int, rate: float = 1000.0, p99: float = 4.0) -> DashboardData:
    """A load of ``seconds`` seconds polled every half second: steady rate, batches of 2 to 8."""
    windows = tuple(
        Window(t / 2, 0.5, int(rate / 2), int(rate / 8), 2, 8, (0.4, 0.1, 0.4, 0.1)) for t in range(1, 2 * seconds + 1)
    )
    bins = tuple(t / 2 - 0.25 for t in range(1, 2 * seconds + 1))
    latency = LatencyBins(bins, tuple(1.0 for _ in bins), tuple(2.0 for _ in bins), tuple(p99 for _ in bins))
    total = ModelStats("m", inference_count=int(rate * seconds), execution_count=int(rate * seconds / 4))
    return DashboardData(
        "m", total, tuple((w.t, w.throughput) for w in windows), latency, windows, ((0.0, 8),), (), float(seconds)
    )


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)


@pytest.mark.parametrize(
    ("value", "steps", "expected"),
    [
        (0.3, None, 0.3),
        (1.0, None, 1.0),
        (1.01, None, 1.5),
        (2400, None, 3000),
        (7100, None, 10000),
        (11, TIME_STEPS, 20),
    ],
)
def test_limits_round_up_to_a_few_steps_per_decade(value, steps, expected):
    assert rounded_up(value, *(() if steps is None else (steps,))) == pytest.approx(expected)


def test_a_blitted_frame_shows_what_a_whole_frame_shows():
    canvas = DashboardCanvas()
    canvas.render(_data(3, rate=1200, p99=3.0))  # lines where the next frame has none: they must go
    blitted = canvas.render(_data(4))  # the same limits (time up to 10 s, rates below 1500): blitted
    assert canvas.full_draws == 1
    whole = DashboardCanvas().render(_data(4))
    differ = np.abs(_pixels(blitted) - _pixels(whole)).sum(axis=2) > 0
    # Only under the legends may they differ: a whole frame shows the data through a legend's frame
    # (80% opaque), a blitted one puts the legend's own pixels back over it.
    assert differ.mean() < 0.01, f"{differ.mean():.2%} of the pixels differ"


def test_the_background_is_drawn_anew_when_a_limit_or_a_title_changes():
    canvas = DashboardCanvas()
    canvas.render(_data(3))
    canvas.render(_data(3, rate=5000))  # the throughput axis grows
    assert canvas.full_draws == 2
    canvas.render(replace(_data(3, rate=5000), concurrency=((0.0, 8), (2.0, 4))))  # the title names 4 clients
    assert canvas.full_draws == 3
    canvas.render(_data(12, rate=5000))  # the time axis passes 10 s
    assert canvas.full_draws == 4


def test_the_last_frame_has_the_datas_own_limits():
    running, last = DashboardCanvas(), DashboardCanvas()
    running.render(_data(3))
    last.render(replace(_data(3), ended=True))
    assert running._axes[0].get_xlim() == (0.0, 10.0)
    assert last._axes[0].get_xlim() == (0.0, 3.0)
