"""One backend source that uses labkit's helper layer (labkit/backend.hpp: LABKIT_MODEL_STATE,
labkit::execute) and Triton's own backend utilities (triton/backend/backend_model.h, backend_common.h,
common's TritonJson) together: built through ``lab.cpp_backend`` against Triton's r23.12 headers and
utilities (read from the pinned sources), served by the real embedded Triton 2.41, answering right."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import labkit
import labkit.repository
import labkit.server
from labkit.native import build_backend, build_project, export_backend, triton_sources
from labkit.native.build import INCLUDE_DIR

# scale: OUTPUT0 = INPUT0 * the config's "scale". Triton's BackendModel parses the config (TritonJson)
# and GetParameterValue reads the parameter; labkit's layer gathers the batch and sends the answers.
MIXED = r"""
#include <string>

#include "labkit/backend.hpp"
#include "triton/backend/backend_common.h"
#include "triton/backend/backend_model.h"

struct ScaleState : labkit::ModelState {
  explicit ScaleState(TRITONBACKEND_Model* m) : labkit::ModelState(m), triton(m) {
    triton::common::TritonJson::Value parameters;
    std::string text;
    if (!triton.ModelConfig().Find("parameters", &parameters)) throw labkit::Error("no parameters in the config");
    labkit::check(triton::backend::GetParameterValue(parameters, "scale", &text));
    scale = std::stof(text);
  }
  triton::backend::BackendModel triton;
  float scale = 1;
};

LABKIT_MODEL_STATE(ScaleState)

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {
    auto& state = batch.model_as<ScaleState>();
    labkit::Tensor values = batch.input("INPUT0");
    labkit::log_info(state.triton.Name() + ": " + triton::backend::ShapeToString(values.shape));
    float* data = values.data<float>();
    for (size_t i = 0; i < values.count<float>(); ++i) data[i] *= state.scale;
    batch.output("OUTPUT0", values);
  });
}
"""


def _config(name: str, scale: str | None) -> labkit.repository.ModelConfig:
    cfg = labkit.model_config(name, "scale", [("INPUT0", "FP32", [3])], [("OUTPUT0", "FP32", [3])], max_batch_size=4)
    if scale is not None:
        cfg.parameters["scale"].string_value = scale
    return cfg


@pytest.mark.slow
def test_labkit_helpers_and_triton_utilities_in_one_backend(backend_examples, tmp_path):
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        srv.repository.write_config(_config("triple", "3"))
        served = srv.cpp_backend("scale", MIXED)
        assert list(served) == ["triple"]
        x = np.array([[1.0, -2.0, 0.5], [4.0, 0.0, 1.0]], dtype=np.float32)
        np.testing.assert_array_equal(labkit.infer(srv, "triple", {"INPUT0": x})["OUTPUT0"], x * 3)
        # Triton's GetParameterValue refusing a config without "scale" fails that model's load, not the server.
        srv.repository.write_config(_config("unscaled", None))
        with pytest.raises(labkit.ModelLoadError) as info:
            srv.cpp_backend("scale", MIXED, models=["unscaled"])
        assert info.value.model == "unscaled" and "triple" in info.value.serving
        np.testing.assert_array_equal(labkit.infer(srv, "triple", {"INPUT0": x[:1]})["OUTPUT0"], x[:1] * 3)


def test_labkit_headers_step_aside_when_tritons_come_first(backend_examples, tmp_path):
    """Included after Triton's own, labkit's tritonserver.h/tritonbackend.h declare nothing twice."""
    source = tmp_path / "both.cc"
    source.write_text(
        '#include "triton/core/tritonbackend.h"\n'
        f'#include "{INCLUDE_DIR}/triton/core/tritonserver.h"\n'
        f'#include "{INCLUDE_DIR}/triton/core/tritonbackend.h"\n'
        "int main() { return TRITONSERVER_TYPE_BF16 == 14 ? 0 : 1; }\n"
    )
    core = triton_sources.source("core") / "include"
    proc = subprocess.run(
        ["g++", "-fsyntax-only", "-Wall", "-Wextra", f"-I{core}", str(source)], capture_output=True, text=True
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr


def test_a_mixed_backend_that_misuses_a_utility_fails_at_its_line(backend_examples, tmp_path):
    broken = MIXED.replace("triton::backend::ShapeToString(values.shape)", "triton::backend::ShapeToString(values)")
    line = broken[: broken.index("ShapeToString(values)")].count("\n") + 1
    with pytest.raises(labkit.BuildError) as info:
        build_backend("scale", broken, cache=tmp_path, progress=False)
    assert f"scale.cc:{line}:" in info.value.compiler_output


def test_helper_layer_compiles_against_tritons_own_headers(tmp_path):
    """labkit's helpers (src/*.cc) against Triton's r23.12 headers: what a mixed build links."""
    from labkit.native.build import json_include
    from labkit.native.helpers import SRC_DIR

    core = triton_sources.source("core") / "include"
    for unit in sorted(SRC_DIR.glob("*.cc")):
        proc = subprocess.run(
            [
                "g++",
                "-std=c++17",
                "-fsyntax-only",
                "-Wall",
                "-Wextra",
                f"-I{core}",
                f"-I{INCLUDE_DIR}",
                f"-I{json_include()}",
                str(unit),
            ],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0 and not proc.stderr, (unit.name, proc.stderr)
    assert (
        Path(core / "triton" / "core" / "tritonserver.h").read_text()
        != (INCLUDE_DIR / "triton/core/tritonserver.h").read_text()
    )


@pytest.mark.slow
def test_a_mixed_backend_exports_builds_offline_and_serves(tmp_path):
    """Its latest build (a cell) exported: labkit's helpers and Triton's utilities both compiled by CMake."""
    build_backend("scale", MIXED, progress=False)
    repository = labkit.repository.ModelRepository(tmp_path / "models")
    repository.write_config(_config("halve", "0.5"))
    project = export_backend("scale", tmp_path / "project", repository=repository)
    assert (project / "src" / "scale.cc").read_text() == MIXED
    cmake = (project / "CMakeLists.txt").read_text()
    assert "set(LABKIT_OFFICIAL_MODE ON)" in cmake and "set(LABKIT_HELPERS ON)" in cmake
    assert (project / "include" / "labkit" / "backend.hpp").exists() and not (project / "offline").exists()
    build_project(project, tmp_path / "prefix", progress=False)
    with labkit.server.EmbeddedServer(
        repository=project / "models", backend_directory=tmp_path / "prefix" / "backends"
    ) as srv:
        srv.start()
        srv.load("halve")
        x = np.array([[2.0, -4.0, 1.0]], dtype=np.float32)
        np.testing.assert_array_equal(labkit.infer(srv, "halve", {"INPUT0": x})["OUTPUT0"], x * 0.5)
