"""Exercises of notebook 02 (C++ backends): a scale read from the config, and the raw execute loop.

Both checks judge the person's latest build in models of their own (labkit.exercises.scratch) or a
server of their own (labkit.exercises.sanitized): the notebook's models and configs stay as they were.
"""

from __future__ import annotations

import numpy as np

from ..errors import BuildError, LabkitError, ModelLoadError
from ..inference import infer
from ..repository import ModelConfig
from ..server.base import TritonServer
from ..stats import model_stats
from .core import NotYet, exercise, reload_with
from .sanitized import SanitizedRun, sanitized_run
from .scratch import config_of, latest, library_files, scratch_model

SCALED_MODELS = ("scaled_a", "scaled_b")
SCALE_BACKEND = "scalecpp"
RAW_MODEL = "raw_double"
RAW_BACKEND = "rawdouble"
#: How long an unload may take before the check concludes that a request was never released (an unload
#: normally ends in milliseconds; with a request held it never ends in 2.41).
RELEASE_WAIT_S = 10.0


@exercise("02-scale", "02_cpp_backends", "a C++ backend that scales by a parameter of its config",
          "ModelState::parameter(key) returns a parameter of the config as a string (std::stof turns it into a float); "
          "ScaleState's constructor runs once per model load.",
          sources=(SCALE_BACKEND,))
def scale(server: TritonServer) -> None:
    build = latest(server, SCALE_BACKEND)
    config = config_of(server, SCALED_MODELS[0], "the cell that configures scaled_a and scaled_b")
    x = np.array([1.0, -2.0, 0.25, 8.0], np.float32)
    # Two models of the same library, then one of them reloaded: the scale belongs to each model load.
    with scratch_model(server, f"scale_a_{build.digest}", config, library_files(build)) as first, \
            scratch_model(server, f"scale_b_{build.digest}", config, library_files(build)) as second:
        for model, factor in ((first, 2.5), (second, -0.5), (first, 7.0)):
            try:
                reload_with(server, model, scale=factor)
            except ModelLoadError as exc:
                raise NotYet(f"a model of scalecpp with parameter scale {factor} did not load: {exc.reason}",
                             rule="load") from None
            y = infer(server, model, {"X": x})["Y"]
            if y.dtype != np.float32 or y.shape != x.shape:
                raise NotYet(f"Y came back as {y.dtype} of shape {list(y.shape)}; the config says FP32 [4].", rule="shape")
            if not np.allclose(y, factor * x):
                raise NotYet(f"a model of scalecpp loaded with parameter scale {factor} answered {y.tolist()} for "
                             f"X={x.tolist()}; expected {(factor * x).tolist()}.", rule="values")


@exercise("02-raw-execute", "02_cpp_backends", "the execute loop without labkit::execute, statistics included",
          "follow the rawcopy loop above: multiply the values while copying them into the output buffer, then "
          "ReportStatistics for each request before releasing it, and ReportBatchStatistics once per execute; "
          "hand what each returns to log_if_error, as rawcopy does.",
          sources=(RAW_BACKEND,))
def raw_execute(server: TritonServer) -> None:
    build = latest(server, RAW_BACKEND)
    config = config_of(server, RAW_MODEL, "the cell that writes the config of raw_double")
    try:
        with sanitized_run(build.source.read_text(), RAW_BACKEND) as run:
            _judge_raw(run, config)
    except BuildError as exc:  # only the sanitized build raises it here
        first = next((line for line in exc.compiler_output.splitlines() if "error" in line), exc.compiler_output[:200])
        raise NotYet(f"rawdouble does not compile with Triton's C API alone (tritonbackend.h, no labkit helpers): {first}",
                     "this exercise is the loop labkit::execute hides: write it with TRITONBACKEND_* calls.",
                     rule="c-api-only") from None


def _judge_raw(run: SanitizedRun, config: ModelConfig) -> None:
    """Load the sanitized build with the notebook's config, send requests over both protocols, then read
    ASan's reports, Triton's statistics and whether the model can finish unloading."""
    server = run.server
    model = "raw_double_check"
    config.name = model
    server.repository.write_config(config)
    (server.repository.model_dir(model) / "1" / run.library.name).write_bytes(run.library.read_bytes())
    try:
        server.load(model)
    except ModelLoadError as exc:
        raise NotYet(f"Triton could not load rawdouble: {exc.reason}", rule="load") from None
    sent = [np.array([3, -4, 0, 12], np.int32), np.array([-1, 1, 100, 7], np.int32),
            np.array([5, 5, 5, 5], np.int32), np.array([2**30 - 1, -(2**30), 9, -9], np.int32)]
    answers = []
    try:
        # Both protocols: gRPC's frontend holds tensors in buffers of exactly their size, so ASan sees an
        # overrun there; HTTP's buffers have room to spare. HTTP is what the notebook uses.
        for i, values in enumerate(sent):
            answers.append(infer(server, model, {"IN0": values}, protocol=("http", "grpc")[i % 2])["OUT0"])
    except LabkitError:
        _memory(run)
        raise
    _memory(run)
    for values, got in zip(sent, answers):
        if got.dtype != np.int32 or got.shape != values.shape:
            raise NotYet(f"OUT0 came back as {got.dtype} of shape {list(got.shape)}; the config says INT32 [4].", rule="shape")
        if not np.array_equal(got, 2 * values):
            raise NotYet(f"for IN0={values.tolist()} OUT0 was {got.tolist()}; expected {(2 * values).tolist()}.",
                         rule="values")
    moved = model_stats(server, model, settle=True)
    if moved.success_count != len(sent):
        raise NotYet(f"the answers are right, but Triton's statistics counted {moved.success_count} successful "
                     f"request(s) for the {len(sent)} answered.",
                     "call TRITONBACKEND_ModelInstanceReportStatistics for each request, before RequestRelease.",
                     rule="statistics")
    if moved.execution_count != len(sent) or sum(moved.batch_counts.values()) != len(sent):
        raise NotYet(f"requests are counted, but Triton counted {moved.execution_count} execution(s) with batch sizes "
                     f"{dict(moved.batch_counts)} for {len(sent)} executions of one request each.",
                     "call TRITONBACKEND_ModelInstanceReportBatchStatistics once per execute, with the request count.",
                     rule="batch-statistics")
    try:
        server.unload(model, timeout_s=RELEASE_WAIT_S)
    except ModelLoadError:
        never = " (your library never calls it)" if run.calls("TRITONBACKEND_RequestRelease") is False else ""
        raise NotYet(f"the answers and statistics are right, but Triton could not finish unloading the model within "
                     f"{RELEASE_WAIT_S:.0f} s: it waits for requests the backend never released.",
                     f"call TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL) once for every "
                     f"request{never}.", rule="release") from None
    _memory(run)


def _memory(run: SanitizedRun) -> None:
    found = run.memory_error()
    if found is not None:
        raise NotYet(f"AddressSanitizer caught a {found.describe()}: the backend touched memory outside a buffer.",
                     "a buffer of `size` bytes holds size / sizeof(int32_t) values: count values, not bytes; and use "
                     "a request only before it is released.",
                     rule="memory")
