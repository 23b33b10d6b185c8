"""Exercises of notebook 02 (C++ backends): a scale read from the config, and the raw execute loop."""

from __future__ import annotations

import numpy as np

from ..inference import infer
from ..native.build import latest_build
from ..server.base import TritonServer
from ..stats import model_stats
from .core import NotYet, exercise, reload_with

SCALED_MODELS = ("scaled_a", "scaled_b")
RAW_MODEL = "raw_double"
RAW_BACKEND = "rawdouble"


@exercise("02-scale", "02_cpp_backends", "a C++ backend that scales by a parameter of its config",
          "ModelState::parameter(key) returns a parameter of the config as a string (std::stof turns it into a float); "
          "ScaleState's constructor runs once per model load.")
def scale(server: TritonServer) -> None:
    x = np.array([1.0, -2.0, 0.25, 8.0], np.float32)
    for model, factor in zip(SCALED_MODELS, (2.5, -0.5)):
        reload_with(server, model, scale=factor)
        y = infer(server, model, {"X": x})["Y"]
        if not np.allclose(y, factor * x):
            raise NotYet(f"{model} with parameter scale {factor} answered {y.tolist()} for X={x.tolist()}; "
                         f"expected {(factor * x).tolist()}.")


@exercise("02-raw-execute", "02_cpp_backends", "the execute loop without labkit::execute, statistics included",
          "follow the rawcopy loop above: multiply the values while copying them into the output buffer, then "
          "ReportStatistics per request and ReportBatchStatistics once, before releasing the requests.")
def raw_execute(server: TritonServer) -> None:
    build = latest_build(RAW_BACKEND, server.toolchain())
    if build is None or not build.source.exists():
        raise NotYet(f"backend {RAW_BACKEND!r} was never built here.", f"run the `%%triton_cpp {RAW_BACKEND}` cell first.")
    if "labkit::execute" in build.source.read_text():
        raise NotYet("the backend still calls labkit::execute: this exercise is the loop it hides.")
    before = model_stats(server, RAW_MODEL, settle=True)
    sent = [np.array([3, -4, 0, 12], np.int32), np.array([-1, 1, 100, 7], np.int32), np.array([5, 5, 5, 5], np.int32)]
    for values in sent:
        got = infer(server, RAW_MODEL, {"IN0": values})["OUT0"]
        if not np.array_equal(got, 2 * values):
            raise NotYet(f"for IN0={values.tolist()} OUT0 was {got.tolist()}; expected {(2 * values).tolist()}.")
    moved = model_stats(server, RAW_MODEL, settle=True).since(before)
    if moved.success_count != len(sent) or moved.execution_count < 1:
        raise NotYet(f"the answers are right, but Triton's statistics counted {moved.success_count} successful request(s) "
                     f"and {moved.execution_count} execution(s) for the {len(sent)} answered.",
                     "call TRITONBACKEND_ModelInstanceReportStatistics for each request and "
                     "TRITONBACKEND_ModelInstanceReportBatchStatistics once per execute, before RequestRelease.")
    if sum(moved.batch_counts.values()) < 1:
        raise NotYet("requests are counted, but no execution reports its batch size.",
                     "call TRITONBACKEND_ModelInstanceReportBatchStatistics once per execute, with the request count.")
