"""The checks of notebooks 02 and 04 against a corpus of answers: right ones written differently pass,
plausible wrong ones fail with the rule that shows what is wrong, and no check leaves anything behind.

Each answer is the reference solution (or starter) with one change, served by a real Triton the way the
notebook serves it (``cpp_backend`` / ``python_model``, as the magics do); the checks judge behaviour."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
from labkit import exercises, reference
from labkit.exercises import REGISTRY

from answers import body, edit, judge

# -- 02-raw-execute ----------------------------------------------------------------------------------------

RAW_LOOP = "for (uint64_t k = 0; k < size / sizeof(int32_t); ++k) out_values[k] = 2 * in_values[k];"
RAW_STATS = "TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], err == nullptr, start, start, end, end);"
RAW_RELEASE = "TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL);"
RAW_BATCH = "TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, count, start, start, end, end);"

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
    "a comment naming labkit::execute": (edit("02-raw-execute", (
        "// rawdouble: OUT0", "// no labkit::execute(instance, requests, count, ...) here: the loop by hand.\n// rawdouble: OUT0")), None),
    "values counted from the shape": (edit("02-raw-execute", (RAW_LOOP,
        "int64_t n = 1;\n  for (uint32_t d = 0; d < dims; ++d) n *= shape[d];\n"
        "  for (int64_t k = 0; k < n; ++k) out_values[k] = in_values[k] + in_values[k];")), None),
    "statistics after the loop, one timestamp each": (edit("02-raw-execute", (RAW_STATS, ""), (RAW_RELEASE, "")
        , ("  const uint64_t end = now_ns();\n  // (6')", "  const uint64_t end = now_ns();\n  for (uint32_t r = 0; r < count; ++r) {\n"
           "    TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], true, start, start, end, end);\n"
           "    TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL);\n  }\n  // (6')")), None),
    "the starter (a copy, no statistics)": (body("02-raw-execute", "starter"), "values"),
    "the loop counts bytes": (edit("02-raw-execute", ("k < size / sizeof(int32_t)", "k < size")), "memory"),
    "requests never released": (edit("02-raw-execute", (RAW_RELEASE, "")), "release"),
    "every request reported failed": (edit("02-raw-execute", (RAW_STATS, RAW_STATS.replace("err == nullptr", "err != nullptr"))),
                                      "statistics"),
    "no batch statistics": (edit("02-raw-execute", (RAW_BATCH, "")), "batch-statistics"),
    "labkit::execute after all": (HELPER_DOUBLE, "c-api-only"),
}


@pytest.fixture(scope="module")
def lab():
    with labkit.EmbeddedServer() as server:
        server.start()
        repo = server.repository
        repo.write_config(labkit.model_config("raw_double", "rawdouble", inputs=[("IN0", "INT32", [4])],
                                              outputs=[("OUT0", "INT32", [4])]))
        for name, factor in [("scaled_a", 2), ("scaled_b", 10)]:
            repo.write_config(labkit.model_config(name, "scalecpp", inputs=[("X", "FP32", [4])],
                                                  outputs=[("Y", "FP32", [4])], parameters={"scale": factor}))
        repo.copy_model_from(reference.repository(), "custom_passthrough")
        for name, backend in [("python_work_batched", "python"), ("cpp_steps_a", "worksteps"), ("cpp_steps_b", "worksteps")]:
            cfg = repo.read_config("custom_passthrough")
            cfg.name, cfg.backend = name, backend
            if backend == "worksteps":
                cfg.parameters["steps"].string_value = "300"
            repo.write_config(cfg)
        yield server


@pytest.mark.parametrize("answer", list(RAW))
def test_02_raw_execute(lab, answer):
    source, rule = RAW[answer]
    judge(lab, "02-raw-execute", lambda: lab.cpp_backend("rawdouble", source, first_line=2, progress=False), rule)


# -- 02-scale ----------------------------------------------------------------------------------------------

SCALE_READ = 'scale(std::stof(parameter("scale", "1")))'
SCALE = {
    "solution": (body("02-scale"), None),
    "std::stod, narrowed": (edit("02-scale", (SCALE_READ, 'scale(static_cast<float>(std::stod(parameter("scale", "1"))))')), None),
    "parsed in the constructor's body": (edit("02-scale", ("#include <string>", "#include <sstream>\n#include <string>"), (
        ", " + SCALE_READ + " {}", " {\n    std::istringstream in(parameter(\"scale\", \"1\"));\n    in >> scale;\n  }")), None),
    "std::atof": (edit("02-scale", (SCALE_READ, 'scale(static_cast<float>(std::atof(parameter("scale", "1").c_str())))'),
                        ("#include <string>", "#include <cstdlib>\n#include <string>")), None),
    "the starter": (body("02-scale", "starter"), "values"),
    "read as an integer": (edit("02-scale", (SCALE_READ, 'scale(static_cast<float>(std::stoi(parameter("scale", "1"))))')), "values"),
    "the notebook's first scale, hard-coded": (edit("02-scale", (SCALE_READ, "scale(2.0f)")), "values"),
    "read once per process": (edit("02-scale", (", " + SCALE_READ + " {}", ' {\n'
        '    static const float first = std::stof(parameter("scale", "1"));\n    scale = first;\n  }')), "values"),
    "another parameter's name": (edit("02-scale", (SCALE_READ, 'scale(std::stof(parameter("factor", "1")))')), "values"),
    "another parameter's name, no fallback": (edit("02-scale", (SCALE_READ, 'scale(std::stof(parameter("factor")))')), "load"),
    "adds instead of multiplying": (edit("02-scale", ("x.data<float>()[k] *= scale", "x.data<float>()[k] += scale")), "values"),
}


@pytest.mark.parametrize("answer", list(SCALE))
def test_02_scale(lab, answer):
    source, rule = SCALE[answer]
    # An answer that cannot load is only built: the check judges the build, and a load that fails in the
    # shared server would leave it serving an older version.
    serve = lab.models.build if rule == "load" else lab.cpp_backend
    judge(lab, "02-scale", lambda: serve("scalecpp", source, first_line=2, progress=False), rule)


# -- 04-vectorize ------------------------------------------------------------------------------------------

VEC_STEPS = """        for _ in range(300):                           # the work, once for the whole batch
            y = y * np.float32(0.999) + x * np.float32(0.001)
"""
VEC_PER_REQUEST_HELPER = '''import numpy as np
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
'''
VEC_STEPS_OUTSIDE = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "INPUTTensor").as_numpy() for r in requests]
        ys = [np.zeros_like(x) for x in xs]
        for _ in range(300):  # the steps outside, but each one still visits every request
            ys = [y * np.float32(0.999) + x * np.float32(0.001) for x, y in zip(xs, ys)]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUTTensor", y)]) for y in ys]
'''
VEC_LOOPS = '''import numpy as np
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
'''
VECTOR = {
    "solution": (body("04-vectorize"), None),
    "explicit loops around one while loop": (VEC_LOOPS, None),
    "the 300 steps in closed form": (edit("04-vectorize", (VEC_STEPS, "        y = x * (np.float32(1) - np.float32(0.999) ** 300)\n")), None),
    "np.vstack and np.array_split at the offsets": (edit("04-vectorize", ("x = np.concatenate(inputs)", "x = np.vstack(inputs)"), (
        "np.split(y, np.cumsum([len(i) for i in inputs])[:-1])", "np.array_split(y, np.cumsum([i.shape[0] for i in inputs])[:-1])")), None),
    "the starter": (body("04-vectorize", "starter"), "per-request"),
    "the work per request, in a helper": (VEC_PER_REQUEST_HELPER, "per-request"),
    "the steps outside, the requests inside": (VEC_STEPS_OUTSIDE, "per-request"),
    "every response gets the whole batch": (edit("04-vectorize", ("for part in parts]", "for part in [y] * len(requests)]")), "values"),
    "one step short": (edit("04-vectorize", ("range(300)", "range(299)")), "values"),
    "split into equal parts": (edit("04-vectorize", ("np.split(y, np.cumsum([len(i) for i in inputs])[:-1])", "np.array_split(y, len(inputs))")), "values"),
}


@pytest.mark.parametrize("answer", list(VECTOR))
def test_04_vectorize(lab, answer):
    source, rule = VECTOR[answer]
    judge(lab, "04-vectorize", lambda: lab.python_model("python_work_batched", source), rule)


def test_04_vectorize_judges_the_latest_model_py_even_when_it_did_not_load(lab):
    def serve():
        lab.python_model("python_work_batched", body("04-vectorize"))  # a right answer serves ...
        with pytest.raises(labkit.ModelLoadError):  # ... and stays loaded when the next edit does not load
            lab.python_model("python_work_batched", edit("04-vectorize", ("def execute(self, requests):", "def execute(self, requests)")))

    judge(lab, "04-vectorize", serve, "load")


# -- 04-steps ----------------------------------------------------------------------------------------------

STEPS_READ = 'steps(std::stoi(parameter("steps", "300")))'
STEPS = {
    "solution": (body("04-steps"), None),
    "std::atoi": (edit("04-steps", (STEPS_READ, 'steps(std::atoi(parameter("steps", "300").c_str()))'),
                        ("#include <string>", "#include <cstdlib>\n#include <string>")), None),
    "an empty parameter means 300": (edit("04-steps", (", " + STEPS_READ + " {}", ' {\n'
        '    const std::string text = parameter("steps");\n    steps = text.empty() ? 300 : std::stoi(text);\n  }')), None),
    "a long count, the loop counting down": (edit("04-steps", ("int steps;", "long steps;"), (STEPS_READ, 'steps(std::stol(parameter("steps", "300")))'),
        ("const int steps =", "const long steps ="), ("for (int s = 0; s < steps; ++s)", "for (long s = steps; s > 0; --s)")), None),
    "the starter": (body("04-steps", "starter"), "steps"),
    "read once per process": (edit("04-steps", (", " + STEPS_READ + " {}", ' {\n'
        '    static const int first = std::stoi(parameter("steps", "300"));\n    steps = first;\n  }')), "steps"),
    "one step too many": (edit("04-steps", ("s < steps", "s <= steps")), "steps"),
    "no default": (edit("04-steps", (STEPS_READ, 'steps(std::stoi(parameter("steps")))')), "load"),
    "another parameter's name": (edit("04-steps", (STEPS_READ, 'steps(std::stoi(parameter("step", "300")))')), "steps"),
    "read, but the loop keeps 300": (edit("04-steps", ("s < steps", "s < 300")), "steps"),
}


@pytest.mark.parametrize("answer", list(STEPS))
def test_04_steps(lab, answer):
    source, rule = STEPS[answer]
    judge(lab, "04-steps", lambda: lab.cpp_backend("worksteps", source, first_line=2, progress=False), rule)


def test_a_check_before_its_cells_ran_says_so_and_writes_nothing(fresh_server):
    verdict = exercises.check("04-vectorize", fresh_server)
    assert not verdict.passed and verdict.rule == "setup"
    assert fresh_server.repository.models() == ["add_sub"]


def test_a_memory_error_is_reported_at_the_cells_line(lab):
    from labkit.exercises.sanitized import sanitized_run

    source = "#line 2\n" + RAW["the loop counts bytes"][0]  # as the magic builds it: its first line is the cell's 2nd
    loop = next(n for n, line in enumerate(REGISTRY["02-raw-execute"].solution().splitlines(), 1) if "k < size" in line)
    with sanitized_run(source, "rawdouble") as run:
        assert run.memory_error() is None and run.calls("TRITONBACKEND_RequestRelease")
        run.server.repository.write_config(lab.repository.read_config("raw_double"))
        (run.server.repository.model_dir("raw_double") / "1" / run.library.name).write_bytes(run.library.read_bytes())
        run.server.load("raw_double")
        # over gRPC: its frontend holds tensors in buffers of exactly their size (HTTP's have room to spare)
        labkit.infer(run.server, "raw_double", {"IN0": np.arange(4, dtype=np.int32)}, protocol="grpc")
        found = run.memory_error()
        assert found is not None and found.kind == "heap-buffer-overflow" and found.line == loop
        folder, server = run.folder, run.server
    assert not folder.exists() and not server.alive
