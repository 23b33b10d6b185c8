"""Lesson: a Python model's own Prometheus metrics, beside Triton's.

``metered`` defines two counters and a gauge with ``pb_utils.MetricFamily`` in ``initialize``, and
updates them in ``execute``: requests seen, rows seen, and how many requests the last execution
held. Triton publishes them on /metrics with its own families; labkit parses that page with
prometheus_client's parser, and the Dashboard draws them live beside Triton's request count.
A family name keeps its kind while a model defines it: a second model defining ``lesson_requests``
as a gauge is refused, and labkit says which family and which model (MetricKindError).

    lab = labkit.start()
    custom_metrics.setup(lab)
    print(custom_metrics.read(lab))
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import AnswerMismatchError, LessonOutcomeError, MetricKindError
from ...observe.dashboard import Dashboard
from ...observe.metric_plots import TRITON_FAMILIES
from ...observe.stats import family_totals
from ...repository import model_config
from ...server.base import TritonServer
from .outcome import Outcome

MODEL = "metered"
FAMILIES = ("lesson_requests", "lesson_rows", "lesson_batch_requests")

SOURCE = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # Keep the families: a Metric is usable only while its MetricFamily object lives.
        self.requests_family = pb_utils.MetricFamily(
            name="lesson_requests", description="requests seen by model.py", kind=pb_utils.MetricFamily.COUNTER)
        self.rows_family = pb_utils.MetricFamily(
            name="lesson_rows", description="batch rows seen by model.py", kind=pb_utils.MetricFamily.COUNTER)
        self.batch_family = pb_utils.MetricFamily(
            name="lesson_batch_requests", description="requests in the last execute", kind=pb_utils.MetricFamily.GAUGE)
        labels = {"model": args["model_name"]}
        self.requests = self.requests_family.Metric(labels=labels)
        self.rows = self.rows_family.Metric(labels=labels)
        self.batch = self.batch_family.Metric(labels=labels)

    def execute(self, requests):
        self.batch.set(len(requests))
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            self.requests.increment(1)
            self.rows.increment(x.shape[0])
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + 1)]))
        return responses
"""

CONFIG = model_config(
    MODEL,
    "python",
    [("X", "FP32", [4])],
    [("Y", "FP32", [4])],
    max_batch_size=8,
    dynamic_batching={"max_queue_delay_microseconds": 2000},
)

CLASH_MODEL = "metered_gauge"
CLASH_SOURCE = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily(
            name="lesson_requests", description="the same name, another kind", kind=pb_utils.MetricFamily.GAUGE)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "X")]) for r in requests]
"""
CLASH_CONFIG = model_config(CLASH_MODEL, "python", [("X", "FP32", [4])], [("X", "FP32", [4])])


def setup(server: TritonServer) -> None:
    server.python_model(MODEL, SOURCE, CONFIG)


def send(server: TritonServer, requests: int = 3, rows: int = 2) -> None:
    """``requests`` requests of ``rows`` rows each, one after another."""
    x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    for _ in range(requests):
        answer = infer(server, MODEL, {"X": x}, ["Y"])["Y"]
        if not np.array_equal(answer, x + 1):
            raise AnswerMismatchError(
                model=MODEL, answered=str(answer.tolist()), expected="X + 1", remedy="check its execute"
            )


def read(server: TritonServer) -> dict[str, tuple[str, float]]:
    """The lesson's families and Triton's for ``metered``, as /metrics has them now: {name: (kind, value)}."""
    wanted = {**{name: {} for name in FAMILIES}, **{name: {"model": MODEL} for name in TRITON_FAMILIES}}
    return family_totals(server.models.metrics_text(), wanted)


def dashboard(server: TritonServer, duration_s: float = 4.0, concurrency: int = 4) -> Dashboard:
    """A live dashboard of a load on ``metered`` with its families beside Triton's; returns when the
    load has ended (the last frame stays as a PNG)."""
    dash = Dashboard(server, MODEL, metrics=FAMILIES)
    x = np.ones((1, 4), dtype=np.float32)
    dash.run({"X": x}, concurrency=concurrency, duration_s=duration_s)
    return dash


def clash_error(server: TritonServer) -> MetricKindError:
    """Load ``metered_gauge``, which defines lesson_requests as a gauge while ``metered`` has it as a
    counter, and return the error; raises if it loaded."""
    try:
        server.python_model(CLASH_MODEL, CLASH_SOURCE, CLASH_CONFIG)
    except MetricKindError as exc:
        return exc
    raise LessonOutcomeError(
        model=CLASH_MODEL,
        happened="loaded",
        expected=f"{MODEL} defines lesson_requests as a counter",
        check=f"load {MODEL} first (setup(server)), then call this again",
    )


def run(server: TritonServer) -> Outcome:
    """model.py's request counter equals Triton's success count, rows are counted, the gauge holds the
    last execution's requests, and a family redefined with another kind is refused with its fields."""
    setup(server)
    before = read(server)
    send(server, requests=3, rows=2)
    after = read(server)
    gained = {name: after[name][1] - before.get(name, (None, 0.0))[1] for name in after}
    error = clash_error(server)
    ok = (
        gained["lesson_requests"] == gained["nv_inference_request_success"] == 3
        and gained["lesson_rows"] == 6
        and after["lesson_batch_requests"] == ("gauge", 1.0)
        and error.registered_by == MODEL
    )
    return Outcome(
        ok,
        {
            "gained": gained,
            "clash": {"metric": error.metric, "kind": error.kind, "registered_kind": error.registered_kind},
        },
    )
