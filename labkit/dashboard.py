"""A live dashboard: plots of batching and timing that redraw while load runs.

    dash = labkit.Dashboard(lab, "minimal_batching")
    dash                      # shows the panel (an ipywidgets VBox)
    with dash:                # polls statistics and redraws in background threads
        dash.result = labkit.run_load(lab, "minimal_batching", inputs, concurrency=8)
    print(dash.summary())     # a deterministic text summary for the notebook's record
"""

from __future__ import annotations

import html
import threading

import ipywidgets as widgets

from . import plots
from ._render import Renderer
from .load import LoadResult
from .server.base import TritonServer
from .stats import StatsCollector


class Dashboard(widgets.VBox):
    """Batch sizes, time per phase, throughput and latency for one model, redrawn every ``refresh_s``."""

    def __init__(self, server: TritonServer, model: str, *, refresh_s: float = 1.0, poll_s: float = 0.25) -> None:
        self._title = widgets.HTML(f"<b>{html.escape(model)}</b>: waiting for load")
        self._image = widgets.Image(format="png")
        super().__init__([self._title, self._image])
        self.model = model
        self.collector = StatsCollector(server, [model], poll_s)
        self.result: LoadResult | None = None
        self._refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renderer: Renderer | None = None

    def __repr__(self) -> str:  # nbval compares text/plain: keep it the same on every run
        return f"<labkit Dashboard for {self.model}>"

    def redraw(self) -> None:
        data = plots.DashboardData.collect(self.collector, self.model, self.result)
        self._image.value = self._renderer.render(data) if self._renderer else plots.png(plots.dashboard_figure(data))
        total = self.collector.total(self.model)
        self._title.value = (
            f"<b>{html.escape(self.model)}</b>: {total.inference_count} inferences in "
            f"{total.execution_count} executions, average batch {total.average_batch_size:.2f}"
        )

    def _loop(self) -> None:
        while not self._stop.wait(self._refresh_s):
            try:
                self.redraw()
            except Exception as exc:  # noqa: BLE001 - never print from a thread; shown in the title
                self._title.value = f"<b>{html.escape(self.model)}</b>: dashboard stopped: {html.escape(str(exc))}"
                return

    def start(self) -> "Dashboard":
        self._renderer = Renderer()
        self.collector.start()
        self._thread = threading.Thread(target=self._loop, name="labkit-dashboard", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.collector.stop()
        try:
            self.redraw()
        finally:
            self._renderer.close()
            self._renderer = None

    def __enter__(self) -> "Dashboard":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summary(self) -> str:
        total = self.collector.total(self.model)
        return f"{self.model}: {total.inference_count} inferences, average batch size {total.average_batch_size:.2f}"
