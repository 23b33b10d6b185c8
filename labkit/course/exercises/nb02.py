"""Exercises of notebooks 02 and 14 (C++ backends): the raw execute loop (02), and a scale read from the config (14).

Both checks judge the person's latest build in models of their own (labkit.course.exercises.scratch) or a
server of their own (labkit.course.exercises.sanitized): the notebook's models and configs stay as they were.
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import BuildError, InferenceError, LabkitError, ModelLoadError
from ...observe.stats import model_stats
from ...repository import ModelConfig
from ...server.base import TritonServer
from .core import NotYet, exercise, reload_with
from .sanitized import SanitizedRun, sanitized_run
from .scratch import config_of, latest, library_files, scratch_model

SCALED_MODELS = ("scaled_a", "scaled_b")
SCALE_BACKEND = "scalecpp"
RAW_MODEL = "raw_sum"
RAW_BACKEND = "rawsum"
#: How long an unload may take before the check concludes that a request was never released (an unload
#: normally ends in milliseconds; with a request held it never ends in 2.41).
RELEASE_WAIT_S = 10.0
#: Triton's documents the hints point to (r23.12).
BACKEND_README = "https://github.com/triton-inference-server/backend/blob/r23.12/README.md"
BACKEND_HEADER = "https://github.com/triton-inference-server/core/blob/r23.12/include/triton/core/tritonbackend.h"


@exercise("14-scale", sources=(SCALE_BACKEND,))
def scale(server: TritonServer) -> None:
    build = latest(server, SCALE_BACKEND)
    config = config_of(server, SCALED_MODELS[0], "the cell that configures scaled_a and scaled_b")
    x = np.array([1.0, -2.0, 0.25, 8.0], np.float32)
    # Two models of the same library, then one of them reloaded: the scale belongs to each model load.
    with (
        scratch_model(server, f"scale_a_{build.digest}", config, library_files(build)) as first,
        scratch_model(server, f"scale_b_{build.digest}", config, library_files(build)) as second,
    ):
        for model, factor in ((first, 2.5), (second, -0.5), (first, 7.0)):
            try:
                reload_with(server, model, scale=factor)
            except ModelLoadError as exc:
                raise NotYet(
                    f"a model of scalecpp with parameter scale {factor} did not load: {exc.reason}", rule="load"
                ) from None
            y = infer(server, model, {"X": x})["Y"]
            if y.dtype != np.float32 or y.shape != x.shape:
                raise NotYet(
                    f"Y came back as {y.dtype} of shape {list(y.shape)}; the config says FP32 [4].", rule="shape"
                )
            if not np.allclose(y, factor * x):
                raise NotYet(
                    f"a model of scalecpp loaded with parameter scale {factor} answered {y.tolist()} for "
                    f"X={x.tolist()}; expected {(factor * x).tolist()}.",
                    rule="values",
                )


@exercise("02-raw-execute", sources=(RAW_BACKEND,))
def raw_execute(server: TritonServer) -> None:
    build = latest(server, RAW_BACKEND)
    config = config_of(server, RAW_MODEL, "the cell that writes the config of raw_sum")
    try:
        with sanitized_run(build.source.read_text(), RAW_BACKEND) as run:
            _judge_raw(run, config)
    except BuildError as exc:  # only the sanitized build raises it here
        first = next((line for line in exc.compiler_output.splitlines() if "error" in line), exc.compiler_output[:200])
        raise NotYet(
            f"rawsum does not compile with Triton's C API alone (tritonbackend.h, no labkit helpers): {first}",
            "this exercise is the loop labkit::execute hides: write it with TRITONBACKEND_* calls.",
            rule="c-api-only",
        ) from None


def _judge_raw(run: SanitizedRun, config: ModelConfig) -> None:
    """Load the sanitized build with the notebook's config, send requests over both protocols, then read
    ASan's reports, Triton's statistics and whether the model can finish unloading."""
    server = run.server
    model = "raw_sum_check"
    config.name = model
    server.repository.write_config(config)
    (server.repository.model_dir(model) / "1" / run.library.name).write_bytes(run.library.read_bytes())
    try:
        server.load(model)
    except ModelLoadError as exc:
        raise NotYet(f"Triton could not load rawsum: {exc.reason}", rule="load") from None
    sent = [
        np.array([3, -4, 0, 12], np.int32),
        np.array([-1, 1, 100, 7], np.int32),
        np.array([5, 5, 5, 5], np.int32),
        np.array([2**30 - 1, -(2**30), 9, -9], np.int32),
    ]
    answers = []
    try:
        # Both protocols: gRPC's frontend holds tensors in buffers of exactly their size, so ASan sees an
        # overrun there; HTTP's buffers have room to spare. HTTP is what the notebook uses.
        for i, values in enumerate(sent):
            answers.append(infer(server, model, {"IN0": values}, protocol=("http", "grpc")[i % 2])["OUT0"])
    except (InferenceError, ValueError) as exc:  # ValueError: tritonclient cannot shape an answer's bytes
        _memory(run)
        raise NotYet(
            f"a request with IN0={sent[len(answers)].tolist()} failed: {(str(exc).strip().splitlines() or [''])[0]}",
            "an output is made with the datatype and shape the config gives it, and its buffer holds exactly "
            f"that many bytes (TRITONBACKEND_ResponseOutput and TRITONBACKEND_OutputBuffer in tritonbackend.h, "
            f"r23.12: {BACKEND_HEADER}).",
            rule="failed",
        ) from None
    except LabkitError:
        _memory(run)
        raise
    _memory(run)
    for values, got in zip(sent, answers):
        want = np.array([values.astype(np.int64).sum()], np.int64)
        if got.dtype != np.int64 or got.shape != (1,):
            raise NotYet(
                f"OUT0 came back as {got.dtype} of shape {list(got.shape)}; the config says INT64 [1].",
                "TRITONBACKEND_ResponseOutput names the output's datatype and shape: those of the config, not the "
                f"input's (tritonbackend.h, r23.12: {BACKEND_HEADER}).",
                rule="shape",
            )
        if not np.array_equal(got, want):
            raise NotYet(f"for IN0={values.tolist()} OUT0 was {got.tolist()}; expected {want.tolist()}.", rule="values")
    moved = model_stats(server, model, settle=True)
    if moved.success_count != len(sent):
        raise NotYet(
            f"the answers are right, but Triton's statistics counted {moved.success_count} successful "
            f"request(s) for the {len(sent)} answered.",
            "Triton's statistics hold only what the backend reports, and a request can be reported only "
            "while the backend still owns it (tritonbackend.h, r23.12: the comments on "
            f"TRITONBACKEND_ModelInstanceReportStatistics, {BACKEND_HEADER}).",
            rule="statistics",
        )
    if moved.execution_count != len(sent) or sum(moved.batch_counts.values()) != len(sent):
        raise NotYet(
            f"requests are counted, but Triton counted {moved.execution_count} execution(s) with batch sizes "
            f"{dict(moved.batch_counts)} for {len(sent)} executions of one request each.",
            "an execution is counted apart from its requests: one batch per execute, however many requests "
            "it held (tritonbackend.h, r23.12: the comments on TRITONBACKEND_ModelInstanceReportBatchStatistics, "
            f"{BACKEND_HEADER}).",
            rule="batch-statistics",
        )
    try:
        server.unload(model, timeout_s=RELEASE_WAIT_S)
    except ModelLoadError:
        never = " (your library never calls it)" if run.calls("TRITONBACKEND_RequestRelease") is False else ""
        raise NotYet(
            f"the answers and statistics are right, but Triton could not finish unloading the model within "
            f"{RELEASE_WAIT_S:.0f} s: it waits for requests the backend never released.",
            f"a request stays the backend's until it hands it back, whatever its response was{never}; an "
            f"unload waits for all of them (backend README, r23.12, Inference Requests and Responses: "
            f"{BACKEND_README}#inference-requests-and-responses).",
            rule="release",
        ) from None
    _memory(run)


def _memory(run: SanitizedRun) -> None:
    found = run.memory_error()
    if found is not None:
        raise NotYet(
            f"AddressSanitizer caught a {found.describe()}: the backend touched memory outside a buffer.",
            "sizes in Triton's C API are in bytes, and a tensor's element takes its datatype's size of them "
            "(TRITONBACKEND_InputBuffer in tritonbackend.h, r23.12); and a request's memory is the backend's "
            f"only until it is released: {BACKEND_HEADER}.",
            rule="memory",
        )
