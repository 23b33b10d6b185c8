"""The checks of notebooks 02 and 04 against a corpus of answers: right ones written differently pass,
plausible wrong ones fail with the rule that shows what is wrong, and no check leaves anything behind.

Each answer is the reference solution (or starter) with one change, served by a real Triton the way the
notebook serves it (``cpp_backend`` / ``python_model``, as the magics do); the checks judge behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from answers import body, edit, judge

import labkit
import labkit.server
from labkit import exercises
from labkit.course import reference
from labkit.course.exercises import REGISTRY

# -- 02-raw-execute ----------------------------------------------------------------------------------------

RAW_LOOP = "for (uint64_t k = 0; k < size / sizeof(int32_t); ++k) sum += in_values[k];"
RAW_STATS = (
    'log_if_error("ReportStatistics", TRITONBACKEND_ModelInstanceReportStatistics(\n'
    "        instance, requests[r], err == nullptr, start, start, end, end));"
)
RAW_RELEASE = (
    'log_if_error("RequestRelease", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));'
)
RAW_BATCH = (
    'log_if_error("ReportBatchStatistics",\n'
    "               TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, count, start, start, end, end));"
)

HELPER_DOUBLE = """#include "labkit/backend.hpp"

LABKIT_MODEL_STATE(labkit::ModelState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    labkit::Tensor in = batch.input("IN0");
    for (size_t k = 0; k < in.count<int32_t>(); ++k) in.data<int32_t>()[k] *= 2;
    batch.output("OUT0", in);
  });
}
"""

RAW = {
    "solution": (body("02-raw-execute"), None),
    "a comment naming labkit::execute": (
        edit(
            "02-raw-execute",
            (
                "// rawsum: OUT0",
                "// no labkit::execute(instance, requests, count, ...) here: the loop by hand.\n// rawsum: OUT0",
            ),
        ),
        None,
    ),
    "std::accumulate": (
        edit(
            "02-raw-execute",
            ("#include <cstdint>", "#include <cstdint>\n#include <numeric>"),
            (
                "int64_t sum = 0;\n  " + RAW_LOOP,
                "const int64_t sum = std::accumulate(in_values, in_values + size / 4, int64_t{0});",
            ),
        ),
        None,
    ),
    "statistics after the loop, one timestamp each": (
        edit(
            "02-raw-execute",
            (RAW_STATS, ""),
            (RAW_RELEASE, ""),
            (
                "  const uint64_t end = now_ns();\n  // (6')",
                "  const uint64_t end = now_ns();\n  for (uint32_t r = 0; r < count; ++r) {\n"
                '    log_if_error("ReportStatistics",\n'
                "                 TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], true, start, start, end, end));\n"
                '    log_if_error("RequestRelease", TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));\n'
                "  }\n  // (6')",
            ),
        ),
        None,
    ),
    "the starter (a copy, no statistics)": (body("02-raw-execute", "starter"), "shape"),
    "the input's shape for the output": (
        edit(
            "02-raw-execute",
            ("TRITONSERVER_TYPE_INT64, shape, 1);", "TRITONSERVER_TYPE_INT64, shape_in, 1);"),
            ("const int64_t shape[1] = {1};", "const int64_t shape_in[1] = {4};"),
        ),
        "failed",
    ),
    "an INT32 sum": (
        edit(
            "02-raw-execute",
            ("TRITONSERVER_TYPE_INT64, shape, 1);", "TRITONSERVER_TYPE_INT32, shape, 1);"),
            ("&out, sizeof(sum),", "&out, sizeof(int32_t),"),
            ("*static_cast<int64_t*>(out) = sum;", "*static_cast<int32_t*>(out) = static_cast<int32_t>(sum);"),
        ),
        "shape",
    ),
    "the loop counts bytes": (edit("02-raw-execute", ("k < size / sizeof(int32_t)", "k < size")), "memory"),
    "requests never released": (edit("02-raw-execute", (RAW_RELEASE, "")), "release"),
    "every request reported failed": (
        edit("02-raw-execute", (RAW_STATS, RAW_STATS.replace("err == nullptr", "err != nullptr"))),
        "statistics",
    ),
    "no batch statistics": (edit("02-raw-execute", (RAW_BATCH, "")), "batch-statistics"),
    "labkit::execute after all": (HELPER_DOUBLE, "c-api-only"),
}


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as server:
        server.start()
        repo = server.repository
        repo.write_config(
            labkit.model_config("raw_sum", "rawsum", inputs=[("IN0", "INT32", [4])], outputs=[("OUT0", "INT64", [1])])
        )
        for name, factor in [("scaled_a", 2), ("scaled_b", 10)]:
            repo.write_config(
                labkit.model_config(
                    name,
                    "scalecpp",
                    inputs=[("X", "FP32", [4])],
                    outputs=[("Y", "FP32", [4])],
                    parameters={"scale": factor},
                )
            )
        repo.copy_model_from(reference.repository(), "custom_passthrough")
        for name, backend in [("python_work_batched", "python"), ("cpp_peak", "peak")]:
            cfg = repo.read_config("custom_passthrough")
            cfg.name, cfg.backend = name, backend
            repo.write_config(cfg)
        yield server


@pytest.mark.parametrize("answer", list(RAW))
def test_02_raw_execute(lab, answer):
    source, rule = RAW[answer]
    judge(lab, "02-raw-execute", lambda: lab.cpp_backend("rawsum", source, first_line=2, progress=False), rule)


# -- 14-scale ----------------------------------------------------------------------------------------------

SCALE_READ = 'scale(std::stof(parameter("scale", "1")))'
SCALE = {
    "solution": (body("14-scale"), None),
    "std::stod, narrowed": (
        edit("14-scale", (SCALE_READ, 'scale(static_cast<float>(std::stod(parameter("scale", "1"))))')),
        None,
    ),
    "parsed in the constructor's body": (
        edit(
            "14-scale",
            ("#include <string>", "#include <sstream>\n#include <string>"),
            (
                ", " + SCALE_READ + " {}",
                ' {\n    std::istringstream in(parameter("scale", "1"));\n    in >> scale;\n  }',
            ),
        ),
        None,
    ),
    "std::atof": (
        edit(
            "14-scale",
            (SCALE_READ, 'scale(static_cast<float>(std::atof(parameter("scale", "1").c_str())))'),
            ("#include <string>", "#include <cstdlib>\n#include <string>"),
        ),
        None,
    ),
    "the starter": (body("14-scale", "starter"), "values"),
    "read as an integer": (
        edit("14-scale", (SCALE_READ, 'scale(static_cast<float>(std::stoi(parameter("scale", "1"))))')),
        "values",
    ),
    "the notebook's first scale, hard-coded": (edit("14-scale", (SCALE_READ, "scale(2.0f)")), "values"),
    "read once per process": (
        edit(
            "14-scale",
            (
                ", " + SCALE_READ + " {}",
                ' {\n    static const float first = std::stof(parameter("scale", "1"));\n    scale = first;\n  }',
            ),
        ),
        "values",
    ),
    "another parameter's name": (
        edit("14-scale", (SCALE_READ, 'scale(std::stof(parameter("factor", "1")))')),
        "values",
    ),
    "another parameter's name, no fallback": (
        edit("14-scale", (SCALE_READ, 'scale(std::stof(parameter("factor")))')),
        "load",
    ),
    "adds instead of multiplying": (
        edit("14-scale", ("x.data<float>()[k] *= scale", "x.data<float>()[k] += scale")),
        "values",
    ),
}


@pytest.mark.parametrize("answer", list(SCALE))
def test_02_scale(lab, answer):
    source, rule = SCALE[answer]
    # An answer that cannot load is only built: the check judges the build, and a load that fails in the
    # shared server would leave it serving an older version.
    serve = lab.models.build if rule == "load" else lab.cpp_backend
    judge(lab, "14-scale", lambda: serve("scalecpp", source, first_line=2, progress=False), rule)


# -- 04-vectorize ------------------------------------------------------------------------------------------

VEC_STEPS = """        for _ in range(300):                           # the work, once for the whole batch
            y = y * np.float32(0.999) + x * np.float32(0.001)
"""
VEC_PER_REQUEST_HELPER = """import numpy as np
import triton_python_backend_utils as pb_utils


def _work(x):
    y = np.zeros_like(x)
    for _ in range(300):
        y = y * np.float32(0.999) + x * np.float32(0.001)
    return y


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUTTensor", _work(pb_utils.get_input_tensor_by_name(r, "INPUTTensor").as_numpy()))]) for r in requests]
"""
VEC_STEPS_OUTSIDE = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "INPUTTensor").as_numpy() for r in requests]
        ys = [np.zeros_like(x) for x in xs]
        for _ in range(300):  # the steps outside, but each one still visits every request
            ys = [y * np.float32(0.999) + x * np.float32(0.001) for x, y in zip(xs, ys)]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUTTensor", y)]) for y in ys]
"""
VEC_LOOPS = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        inputs, rows = [], []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUTTensor").as_numpy()
            inputs.append(x)
            rows.append(x.shape[0])
        batch = np.concatenate(inputs, axis=0)
        y = np.zeros_like(batch)
        step = 0
        while step < 300:
            np.multiply(y, np.float32(0.999), out=y)
            y += batch * np.float32(0.001)
            step += 1
        responses, start = [], 0
        for n in rows:
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUTTensor", y[start:start + n])]))
            start += n
        return responses
"""
VECTOR = {
    "solution": (body("04-vectorize"), None),
    "explicit loops around one while loop": (VEC_LOOPS, None),
    "the 300 steps in closed form": (
        edit("04-vectorize", (VEC_STEPS, "        y = x * (np.float32(1) - np.float32(0.999) ** 300)\n")),
        None,
    ),
    "np.vstack and np.array_split at the offsets": (
        edit(
            "04-vectorize",
            ("x = np.concatenate(inputs)", "x = np.vstack(inputs)"),
            (
                "np.split(y, np.cumsum([len(i) for i in inputs])[:-1])",
                "np.array_split(y, np.cumsum([i.shape[0] for i in inputs])[:-1])",
            ),
        ),
        None,
    ),
    "the starter": (body("04-vectorize", "starter"), "per-request"),
    "the work per request, in a helper": (VEC_PER_REQUEST_HELPER, "per-request"),
    "the steps outside, the requests inside": (VEC_STEPS_OUTSIDE, "per-request"),
    "every response gets the whole batch": (
        edit("04-vectorize", ("for part in parts]", "for part in [y] * len(requests)]")),
        "values",
    ),
    "one step short": (edit("04-vectorize", ("range(300)", "range(299)")), "values"),
    "split into equal parts": (
        edit(
            "04-vectorize", ("np.split(y, np.cumsum([len(i) for i in inputs])[:-1])", "np.array_split(y, len(inputs))")
        ),
        "values",
    ),
}


@pytest.mark.parametrize("answer", list(VECTOR))
def test_04_vectorize(lab, answer):
    source, rule = VECTOR[answer]
    judge(lab, "04-vectorize", lambda: lab.python_model("python_work_batched", source), rule)


def test_04_vectorize_judges_the_latest_model_py_even_when_it_did_not_load(lab):
    def serve():
        lab.python_model("python_work_batched", body("04-vectorize"))  # a right answer serves ...
        with pytest.raises(labkit.ModelLoadError):  # ... and stays loaded when the next edit does not load
            lab.python_model(
                "python_work_batched",
                edit("04-vectorize", ("def execute(self, requests):", "def execute(self, requests)")),
            )

    judge(lab, "04-vectorize", serve, "load")


# -- 04-peak -----------------------------------------------------------------------------------------------

PEAK_WIDTH = "const size_t width = static_cast<size_t>(t.shape.back());  // 128: the last dimension"
PEAK_MAX = "for (size_t k = start; k < start + width; ++k) peak = std::max(peak, std::fabs(v[k]));"
PEAK_DIVIDE = "for (size_t k = start; k < start + width; ++k) v[k] /= peak;"
PEAK = {
    "solution": (body("04-peak"), None),
    "width 128, multiplied by the inverse": (
        edit(
            "04-peak",
            (PEAK_WIDTH, "const size_t width = 128;"),
            (
                PEAK_DIVIDE,
                "const float inverse = 1.0f / peak;\n        for (size_t k = start; k < start + width; ++k) v[k] *= inverse;",
            ),
        ),
        None,
    ),
    "std::max_element over magnitudes": (
        edit(
            "04-peak",
            (
                PEAK_MAX,
                "peak = std::fabs(*std::max_element(v + start, v + start + width, "
                "[](float x, float y) { return std::fabs(x) < std::fabs(y); }));",
            ),
        ),
        None,
    ),
    "vectors counted from the shape": (
        edit(
            "04-peak",
            (
                "for (size_t start = 0; start < t.count<float>(); start += width) {  // one vector at a time",
                "const int64_t vectors = t.element_count() / t.shape.back();\n    for (int64_t n = 0; n < vectors; ++n) {\n"
                "      const size_t start = static_cast<size_t>(n) * width;",
            ),
        ),
        None,
    ),
    "the starter": (body("04-peak", "starter"), "unchanged"),
    "one peak for the whole request": (
        edit("04-peak", (PEAK_WIDTH, "const size_t width = t.count<float>();")),
        "values",
    ),
    "the largest value, not magnitude": (
        edit("04-peak", ("std::max(peak, std::fabs(v[k]))", "std::max(peak, v[k])")),
        "values",
    ),
    "a vector of zeros divided by 0": (edit("04-peak", ("if (peak > 0.0f) {", "{")), "zeros"),
    "vectors of 256 values": (edit("04-peak", (PEAK_WIDTH, "const size_t width = 256;")), "values"),
    "only the first request's rows": (
        edit("04-peak", ("start < t.count<float>()", "start < static_cast<size_t>(batch.rows(0)) * 256")),
        "mixed",
    ),
}


@pytest.mark.parametrize("answer", list(PEAK))
def test_04_peak(lab, answer):
    source, rule = PEAK[answer]
    judge(lab, "04-peak", lambda: lab.cpp_backend("peak", source, first_line=2, progress=False), rule)


def test_a_check_before_its_cells_ran_says_so_and_writes_nothing(fresh_server):
    verdict = exercises.check("04-vectorize", fresh_server)
    assert not verdict.passed and verdict.rule == "setup"
    assert fresh_server.repository.models() == ["add_sub"]


def test_a_memory_error_is_reported_at_the_cells_line(lab):
    from labkit.course.exercises.sanitized import sanitized_run

    source = "#line 2\n" + RAW["the loop counts bytes"][0]  # as the magic builds it: its first line is the cell's 2nd
    loop = next(n for n, line in enumerate(REGISTRY["02-raw-execute"].solution().splitlines(), 1) if "k < size" in line)
    with sanitized_run(source, "rawsum") as run:
        assert run.memory_error() is None and run.calls("TRITONBACKEND_RequestRelease")
        run.server.repository.write_config(lab.repository.read_config("raw_sum"))
        (run.server.repository.model_dir("raw_sum") / "1" / run.library.name).write_bytes(run.library.read_bytes())
        run.server.load("raw_sum")
        # over gRPC: its frontend holds tensors in buffers of exactly their size (HTTP's have room to spare)
        labkit.infer(run.server, "raw_sum", {"IN0": np.arange(4, dtype=np.int32)}, protocol="grpc")
        found = run.memory_error()
        assert found is not None and found.kind == "heap-buffer-overflow" and found.line == loop
        folder, server = run.folder, run.server
    assert not folder.exists() and not server.alive
