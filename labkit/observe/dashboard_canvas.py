"""The live dashboard's figure, kept from frame to frame and drawn by blitting.

Most of a frame's cost is text: tick labels, titles, axis labels (about 70 text layouts a frame). They change
only when an axis' limits change, so the canvas keeps a picture of the axes without their data (the
background) and, while the limits stay, a frame is that picture with the data drawn over it. While the load
runs, upper limits are rounded up (values to 1, 1.5, 2, 3, 5 or 7 times a power of ten, time to 10, 20, 50,
100 ... seconds), so that they change every few seconds rather than every frame; the last frame has the
data's own limits. A frame drawn either way shows the same.
"""

from __future__ import annotations

import io
import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from . import plots

# Upper limits an axis takes while the load runs, per decade: an axis changes when its data passes one.
VALUE_STEPS = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0)
TIME_STEPS = (1.0, 2.0, 5.0, 10.0)
SHORTEST_TIME_AXIS_S = 10.0


def rounded_up(value: float, steps: tuple[float, ...] = VALUE_STEPS) -> float:
    """The smallest of ``steps`` (times a power of ten) that is at least ``value``."""
    if value <= 0:
        return value
    decade = 10.0 ** math.floor(math.log10(value))
    return next(step * decade for step in steps if step * decade >= value * (1 - 1e-12))


class DashboardCanvas:
    """One figure, its axes and their background, reused for every frame of every dashboard of a process."""

    def __init__(self) -> None:
        self._new_figure(2)

    def _new_figure(self, rows: int) -> None:
        self.figure, self._axes = plots.dashboard_axes(rows)
        self._canvas = FigureCanvasAgg(self.figure)
        self._background = None
        self._legends: list = []  # each legend's pixels, put back over the data
        self._layout: tuple = ()
        self.full_draws = 0  # frames that drew their text anew (the rest were blitted)

    def render(self, data: plots.DashboardData) -> bytes:
        rows = plots.dashboard_rows(data)
        if len(self._axes) != 2 * rows:
            self._new_figure(rows)
        for ax in self._axes:
            for artist in [*ax.lines, *ax.collections, *ax.texts, *ax.patches]:
                artist.remove()
            if ax.get_legend() is not None:
                ax.get_legend().remove()
            ax.relim()
            ax.set_autoscale_on(True)  # set_ylim in the last frame switched it off
        plots.draw_dashboard(data, self._axes)
        if not data.ended:
            for ax in self._axes:
                _round_limits(ax)
        # in the order a full draw takes them: by zorder within each axes (bands and stacks under lines)
        changing = [
            a
            for ax in self._axes
            for a in sorted((*ax.collections, *ax.patches, *ax.lines, *ax.texts), key=lambda a: a.get_zorder())
        ]
        for artist in changing:
            artist.set_animated(True)  # left out of the background; drawn over it below
        layout = tuple(_layout(ax) for ax in self._axes)
        renderer = self._canvas.get_renderer()
        if layout != self._layout or self._background is None:
            self._canvas.draw()  # everything but the data: the legends too, whose words do not change
            self._background = self._canvas.copy_from_bbox(self.figure.bbox)
            self._legends = [
                self._canvas.copy_from_bbox(ax.get_legend().get_window_extent(renderer))
                for ax in self._axes
                if ax.get_legend() is not None
            ]
            self._layout = layout
            self.full_draws += 1
        else:
            self._canvas.restore_region(self._background)
        for artist in changing:
            artist.draw(renderer)
        for legend in self._legends:  # over the data, as a full draw puts them
            self._canvas.restore_region(legend)
        size = self._canvas.get_width_height()
        picture = Image.frombuffer("RGBA", size, self._canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        out = io.BytesIO()
        # zlib's fastest level: a third of the frame's cost at the default level, for a PNG 7% larger
        picture.save(out, format="png", compress_level=1)
        return out.getvalue()


def _round_limits(ax) -> None:
    """Round an axes' upper limits up (time on x, values on y; both keep their lower limit)."""
    x0, x1 = ax.get_xlim()
    if x0 >= 0:
        ax.set_xlim(x0, rounded_up(max(x1, SHORTEST_TIME_AXIS_S), TIME_STEPS))
    y0, y1 = ax.get_ylim()
    if y0 >= 0:
        ax.set_ylim(y0, rounded_up(y1))


def _layout(ax) -> tuple:
    """What the background of one axes shows: its limits and its words."""
    legend = ax.get_legend()
    words = tuple(text.get_text() for text in legend.get_texts()) if legend is not None else None
    return (ax.get_xlim(), ax.get_ylim(), ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), words)
