"""A live dashboard: throughput, latency percentiles, batch sizes and queue-vs-compute over time,
redrawn while load flows, with controls that change the load and the model's batching config.

    dash = labkit.Dashboard(lab, "minimal_batching")
    dash.run(inputs, concurrency=8, duration_s=20)   # returns at once; shows the panel and its controls
    dash.concurrency.value = 2                       # what the slider does; the config controls reload the model
    dash.wait()                                      # or dash.stop(); then the last frame stays as an image

It also watches a load run elsewhere: ``with dash: labkit.run_load(...)``. Polling and drawing happen
in background threads (drawing in a low-priority process, labkit.observe._render); a background thread never
prints. When it stops, the displayed panel is replaced by its last frame as a plain ``image/png``
output, which the saved notebook keeps (GitHub and a fresh JupyterLab show it without the kernel).
"""

from __future__ import annotations

import base64
import html
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import numpy as np

from ..errors import AlreadyRanError, LabkitError
from ..gpu import metrics as gpu_metrics
from ..plumbing.transport import closing_http
from ..server.base import TritonServer
from ..traffic.generator import Inputs, Load, LoadResult
from . import _render, plots
from .metric_plots import TRITON_FAMILIES
from .stats import StatsCollector


class _Latencies:
    """Latency percentiles per closed window of a running load, computed once per window (so that a
    long run costs the kernel no more per redraw than a short one)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._taken = 0
        self._open = np.empty((0, 2))
        self._closed = 0
        self._t: list[float] = []
        self._p: list[tuple[float, float, float]] = []

    def update(self, done: list[tuple[float, float]], until: float, offset: float) -> plots.LatencyBins:
        """``done``: the load's (finished, latency) list; windows ending by ``until`` close now."""
        new = done[self._taken : len(done)]
        self._taken += len(new)
        if new:
            self._open = np.concatenate([self._open, np.asarray(new, dtype=float).reshape(-1, 2)])
        while (self._closed + 1) * self.window_s <= until + 1e-9:
            end = (self._closed + 1) * self.window_s
            inside = self._open[:, 0] < end
            lat = self._open[inside, 1]
            self._open = self._open[~inside]
            if lat.size:
                self._t.append(offset + end - self.window_s / 2)
                q50, q90, q99 = (float(np.percentile(lat, q) * 1e3) for q in (50, 90, 99))
                self._p.append((q50, q90, q99))
            self._closed += 1
        p50, p90, p99 = (tuple(p[i] for p in self._p) for i in range(3))
        return plots.LatencyBins(tuple(self._t), p50, p90, p99)


class Dashboard(widgets.VBox):
    """Throughput, latency, batch sizes and time shares of one model, redrawn every ``refresh_s``;
    statistics polled every ``poll_s`` (each poll closes a window of the server-side panels).
    ``metrics``: metric families a model.py defines (``pb_utils.MetricFamily``), each summed over its
    labels, drawn in a third row beside Triton's own request count and pending requests for ``model``."""

    def __init__(
        self,
        server: TritonServer,
        model: str,
        *,
        refresh_s: float = 1.0,
        poll_s: float = 0.25,
        window_s: float = 0.5,
        metrics: Sequence[str] = (),
    ) -> None:
        self._title = widgets.HTML(f"<b>{html.escape(model)}</b>: waiting for load")
        self._image = widgets.Image(format="png")
        self.concurrency = widgets.IntSlider(value=1, min=1, max=32, description="clients")
        self.queue_delay_us = widgets.BoundedIntText(
            value=0, min=0, max=10_000_000, step=500, description="queue delay µs"
        )
        self.preferred = widgets.Text(value="", placeholder="e.g. 4, 8", description="preferred")
        self.apply = widgets.Button(description="apply config + reload")
        self.stop_button = widgets.Button(description="stop", button_style="warning")
        self.status = widgets.HTML("")
        self._controls = widgets.VBox(
            [
                widgets.HBox([self.concurrency, self.stop_button]),
                widgets.HBox([self.queue_delay_us, self.preferred, self.apply]),
                self.status,
            ],
            layout=widgets.Layout(display="none"),
        )
        super().__init__([self._title, self._controls, self._image])
        self.server, self.model = server, model
        families = {**{name: {} for name in metrics}, **{name: {"model": model} for name in TRITON_FAMILIES}}
        self.collector = StatsCollector(server, [model], poll_s, metrics=families if metrics else ())
        self.result: LoadResult | None = None
        self.load: Load | None = None
        self.error: LabkitError | None = None  # why a load the dashboard drove ended early
        self.frames = 0  # frames drawn so far
        self._refresh_s, self._window_s = refresh_s, window_s
        self._latencies = _Latencies(window_s)
        self._clients: list[tuple[float, int]] = []
        self._events: list[tuple[float, str]] = []
        self._offset = 0.0  # when the load began, in the collector's seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renderer: _render.Renderer | None = None
        self._display: Any = None
        self._finished = False
        self._finish_lock = threading.Lock()
        self.concurrency.observe(self._on_concurrency, names="value")
        self.apply.on_click(lambda _: self._apply_controls())
        self.stop_button.on_click(lambda _: self.stop())

    def __repr__(self) -> str:  # nbval compares text/plain: keep it the same on every run
        return f"<labkit Dashboard for {self.model}>"

    # -- showing it, and leaving a picture behind -------------------------------------------------------

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if self._finished and self._image.value:
            display(self._final_bundle(), raw=True)
        else:
            self._display = display(self._repr_mimebundle_(), raw=True, display_id=True)

    def _final_bundle(self) -> dict[str, str]:
        return {"image/png": base64.b64encode(bytes(self._image.value)).decode(), "text/plain": repr(self)}

    # -- driving a load --------------------------------------------------------------------------------

    def run(
        self,
        inputs: Inputs | Callable[[int], Inputs],
        *,
        concurrency: int = 8,
        duration_s: float | None = None,
        protocol: str = "http",
        timeout_s: float | None = None,
    ) -> Dashboard:
        """Start a load (until ``duration_s`` has passed, or ``stop()``) and the live panels; returns at once.
        The controls change its concurrency and the model's queue delay / preferred batch sizes."""
        if self.load is not None or self._thread is not None:
            raise AlreadyRanError(what="dashboard", remedy="make a new one for another load")
        batching = self.server.repository.read_config(
            self.model
        ).dynamic_batching  # as written, not as Triton filled it in
        self.queue_delay_us.value = int(batching.max_queue_delay_microseconds)
        self.preferred.value = ", ".join(str(int(s)) for s in batching.preferred_batch_size)
        self.concurrency.max = max(self.concurrency.max, concurrency)
        self.concurrency.value = concurrency  # before the load exists: not a change of the load
        self.load = Load(
            self.server,
            self.model,
            inputs,
            concurrency=concurrency,
            duration_s=duration_s,
            protocol=protocol,
            timeout_s=timeout_s,
        )
        self._controls.layout.display = "flex"
        self.start()
        self._offset = self._now()
        self.load.start()
        self._clients.append((self._offset, concurrency))
        return self

    def _now(self) -> float:
        return time.monotonic() - self.collector.started_at

    def _on_concurrency(self, change: Mapping[str, Any]) -> None:
        if self.load is not None and self.load.running:
            self.load.concurrency = int(change["new"])
            self._clients.append((self._now(), int(change["new"])))

    def configure(self, *, max_queue_delay_us: int | None = None, preferred: Sequence[int] | None = None) -> None:
        """Change the model's dynamic batching and reload it (what "apply config + reload" does)."""
        when = self._now()
        cfg = self.server.repository.read_config(self.model)
        what = []
        if max_queue_delay_us is not None:
            cfg.dynamic_batching.max_queue_delay_microseconds = int(max_queue_delay_us)
            what.append(f"delay {int(max_queue_delay_us)} µs")
        if preferred is not None:
            cfg.dynamic_batching.preferred_batch_size[:] = [int(s) for s in preferred]
            what.append(f"prefer {list(cfg.dynamic_batching.preferred_batch_size) or 'none'}")
        self.server.repository.write_config(cfg)
        self.server.load(self.model)
        self._events.append((when, ", ".join(what)))

    def _apply_controls(self) -> None:
        try:
            preferred = [int(p) for p in self.preferred.value.replace(",", " ").split()]
            self.configure(max_queue_delay_us=self.queue_delay_us.value, preferred=preferred)
            self.status.value = f"reloaded {html.escape(self.model)}: {html.escape(self._events[-1][1])}"
        except (ValueError, LabkitError) as exc:  # shown where the button is; a callback must not raise
            self.status.value = f"<span style='color:#b00'>{html.escape(str(exc).splitlines()[0])}</span>"

    # -- the live part ------------------------------------------------------------------------------------

    def redraw(self) -> None:
        now, ended = self._now(), None
        if self.load is not None:
            latency = self._latencies.update(self.load.completions, self.load.elapsed_s, self._offset)
            if not self.load.running:
                ended = now = self._offset + self.load.elapsed_s
        else:
            latency = plots.LatencyBins.from_result(self.result)
        data = plots.DashboardData.collect(
            self.collector,
            self.model,
            latency=latency,
            concurrency=self._clients,
            events=self._events,
            elapsed_s=now,
            until=ended,
        )
        self._image.value = self._renderer.render(data) if self._renderer else plots.png(plots.dashboard_figure(data))
        self.frames += 1
        total = self.collector.total(self.model)
        running = (
            f", {self.load.concurrency} clients, {self.load.elapsed_s:.0f} s" if self.load and self.load.running else ""
        )
        latest = self.collector.samples[-1] if self.collector.samples else None
        gpus = gpu_metrics.summary(latest.gpus) if latest is not None else ""  # nv_gpu_*: only where a GPU is
        self._title.value = (
            f"<b>{html.escape(self.model)}</b>: {total.inference_count} inferences in "
            f"{total.execution_count} executions, average batch {total.average_batch_size:.2f}{running}"
            + (f"<br>{html.escape(gpus)}" if gpus else "")
        )

    def _loop(self) -> None:
        # Never print from here (it would land in whatever cell runs): problems go to the title.
        failed = False
        next_frame = time.monotonic() + self._refresh_s
        while not self._stop.wait(max(0.0, next_frame - time.monotonic())):
            next_frame = max(next_frame + self._refresh_s, time.monotonic())  # a steady cadence, no catching up
            if not failed:
                try:
                    self.redraw()
                except Exception as exc:  # noqa: BLE001 - shown in the title; the load goes on
                    failed = True
                    self._title.value = f"<b>{html.escape(self.model)}</b>: drawing stopped: {html.escape(str(exc))}"
            if self.load is not None and not self.load.running:
                break
        if self.load is not None:
            try:
                self._finish()
            except Exception as exc:  # noqa: BLE001 - as above
                self._title.value = f"<b>{html.escape(self.model)}</b>: dashboard stopped: {html.escape(str(exc))}"

    def start(self) -> Dashboard:
        self._renderer = _render.shared()
        self.collector.start()
        self._thread = threading.Thread(target=closing_http(self._loop), name="labkit-dashboard", daemon=True)
        self._thread.start()
        return self

    def _finish(self) -> None:
        """Once: the load's result, the collector's last poll, the last frame, and that frame left behind
        as an image in place of the live panel."""
        with self._finish_lock:  # held throughout: a second caller returns once the first is done
            if self._finished:
                return
            try:
                if self.load is not None:
                    self._controls.layout.display = "none"
                    try:
                        self.result = self.load.stop()
                    except LabkitError as exc:  # e.g. the server died: wait() raises it
                        self.error = exc
                self.collector.stop()
                if self.server.alive:
                    self.redraw()
            finally:
                self._finished = True
                self._renderer = None  # shared with later dashboards: it stays
                if self._display is not None and self._image.value:
                    self._display.update(self._final_bundle(), raw=True)

    def wait(self, timeout_s: float | None = None) -> LoadResult | None:
        """Wait until the load ends (duration over, or stopped); its result."""
        if self.load is not None:
            try:
                self.load.wait(timeout_s)
            except LabkitError:
                pass  # kept by _finish, raised below
        if self._thread is not None:
            self._thread.join()
        self._finish()
        if self.error is not None:
            raise self.error
        return self.result

    def stop(self) -> LoadResult | None:
        """Stop the load (if the dashboard drives one) and the live panels; the last frame stays."""
        if self.load is not None:
            self.load.stop(wait=False)
        self._stop.set()
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join()
        self._finish()
        return self.result

    def __enter__(self) -> Dashboard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summary(self) -> str:
        total = self.collector.total(self.model)
        return f"{self.model}: {total.inference_count} inferences, average batch size {total.average_batch_size:.2f}"
