"""The checks of notebooks 02 and 04 against a corpus of answers: right ones written differently pass,
plausible wrong ones fail with the rule that shows what is wrong, and no check leaves anything behind.

Each answer is the reference solution (or starter) with one change, served by a real Triton the way the
notebook serves it (``cpp_backend`` / ``python_model``, as the magics do); the checks judge behaviour."""

from __future__ import annotations

import pytest

import labkit
from labkit import exercises, reference
from labkit.exercises import REGISTRY
from labkit.exercises.scratch import PREFIX


def _body(exercise_id: str, kind: str = "solution") -> str:
    """The cell without its magic line."""
    cell = REGISTRY[exercise_id].starter() if kind == "starter" else REGISTRY[exercise_id].solution()
    return cell.split("\n", 1)[1]


def _edit(exercise_id: str, *changes: tuple[str, str], kind: str = "solution") -> str:
    text = _body(exercise_id, kind)
    for old, new in changes:
        assert old in text, f"{exercise_id}: {old!r} is not in the {kind}"
        text = text.replace(old, new)
    return text


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
    "solution": (_body("02-raw-execute"), None),
    "a comment naming labkit::execute": (_edit("02-raw-execute", (
        "// rawdouble: OUT0", "// no labkit::execute(instance, requests, count, ...) here: the loop by hand.\n// rawdouble: OUT0")), None),
    "values counted from the shape": (_edit("02-raw-execute", (RAW_LOOP,
        "int64_t n = 1;\n  for (uint32_t d = 0; d < dims; ++d) n *= shape[d];\n"
        "  for (int64_t k = 0; k < n; ++k) out_values[k] = in_values[k] + in_values[k];")), None),
    "statistics after the loop, one timestamp each": (_edit("02-raw-execute", (RAW_STATS, ""), (RAW_RELEASE, "")
        , ("  const uint64_t end = now_ns();\n  // (6')", "  const uint64_t end = now_ns();\n  for (uint32_t r = 0; r < count; ++r) {\n"
           "    TRITONBACKEND_ModelInstanceReportStatistics(instance, requests[r], true, start, start, end, end);\n"
           "    TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL);\n  }\n  // (6')")), None),
    "the starter (a copy, no statistics)": (_body("02-raw-execute", "starter"), "values"),
    "the loop counts bytes": (_edit("02-raw-execute", ("k < size / sizeof(int32_t)", "k < size")), "memory"),
    "requests never released": (_edit("02-raw-execute", (RAW_RELEASE, "")), "release"),
    "every request reported failed": (_edit("02-raw-execute", (RAW_STATS, RAW_STATS.replace("err == nullptr", "err != nullptr"))),
                                      "statistics"),
    "no batch statistics": (_edit("02-raw-execute", (RAW_BATCH, "")), "batch-statistics"),
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


def _leaves_nothing(lab, before: dict[str, str], loaded: set[str]) -> None:
    assert not [m for m in lab.repository.models() if m.startswith(PREFIX)]
    assert not [m["name"] for m in lab.index() if m["name"].startswith(PREFIX)]
    assert set(lab.loaded_models()) == loaded
    assert {m: (lab.repository.model_dir(m) / "config.pbtxt").read_text() for m in before} == before


def _judge(lab, exercise_id: str, serve, expected_rule: str | None) -> None:
    serve()
    configs = {m: (lab.repository.model_dir(m) / "config.pbtxt").read_text() for m in lab.repository.models()}
    loaded = set(lab.loaded_models())
    verdict = exercises.check(exercise_id, lab)
    assert verdict.passed == (expected_rule is None), repr(verdict)
    assert verdict.rule == (expected_rule or ""), repr(verdict)
    _leaves_nothing(lab, configs, loaded)


@pytest.mark.parametrize("answer", list(RAW))
def test_02_raw_execute(lab, answer):
    source, rule = RAW[answer]
    _judge(lab, "02-raw-execute", lambda: lab.cpp_backend("rawdouble", source, first_line=2, progress=False), rule)
