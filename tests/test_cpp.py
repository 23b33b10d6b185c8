"""C++ backends compiled with the real g++ and loaded into a real Triton 23.12."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from cpp_support import scaled_by, scaling_model, scaling_source

import labkit
import labkit.errors
import labkit.server
from labkit.course import reference
from labkit.native import build_backend, reference_source
from labkit.native.build import INCLUDE_DIR, exported_symbols

MINIMAL = reference_source("minimal").read_text()


@pytest.fixture(scope="module")
def cpp_server():
    """A server with the C++ reference models built and loaded."""
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        reference.serve(
            srv, ["minimal_nonbatching", "minimal_batching", "recommended_batching", "custom_passthrough", "add_sub"]
        )
        yield srv


def test_headers_declare_the_23_12_api():
    server_h = (INCLUDE_DIR / "triton" / "core" / "tritonserver.h").read_text()
    backend_h = (INCLUDE_DIR / "triton" / "core" / "tritonbackend.h").read_text()
    assert re.search(r"TRITONBACKEND_API_VERSION_MINOR\s+17", backend_h)
    assert re.search(r"TRITONSERVER_API_VERSION_MINOR\s+27", server_h)
    for name, value in {
        "TRITONSERVER_TYPE_FP32": 11,
        "TRITONSERVER_TYPE_BYTES": 13,
        "TRITONSERVER_ERROR_INVALID_ARG": 3,
    }.items():
        assert re.search(rf"{name}\s*=\s*{value}\b", server_h), name


def test_library_exports_entry_points_and_never_links_triton(tmp_path):
    build = build_backend("minimal", MINIMAL, cache=tmp_path, progress=False)
    assert "TRITONBACKEND_ModelInstanceExecute" in exported_symbols(build.library)
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(build.library)], capture_output=True, text=True
    ).stdout
    assert "TRITONBACKEND_RequestInput" in undefined or "TRITONBACKEND_RequestInputCount" in undefined
    needed = subprocess.run(["readelf", "-d", str(build.library)], capture_output=True, text=True).stdout
    assert "tritonserver" not in needed


def test_unchanged_source_is_not_rebuilt(tmp_path, capsys):
    first = build_backend("minimal", MINIMAL, cache=tmp_path)
    assert not first.cached and "building backend 'minimal' ... done" in capsys.readouterr().out
    again = build_backend("minimal", MINIMAL, cache=tmp_path)
    assert again.cached and again.library == first.library and again.seconds == 0.0
    assert capsys.readouterr().out == "building backend 'minimal' ... done\n"  # same words: stable notebooks
    edited = build_backend("minimal", MINIMAL + "\n// an edit\n", cache=tmp_path, progress=False)
    assert not edited.cached and edited.digest != first.digest


def test_compile_error_keeps_cell_line_numbers(cpp_server):
    source = MINIMAL + "\n\nint broken() { return undeclared_name; }\n"
    broken_line = source.splitlines().index("int broken() { return undeclared_name; }") + 1
    versions = cpp_server.repository.versions("minimal_nonbatching")
    with pytest.raises(labkit.BuildError) as info:
        cpp_server.cpp_backend("minimal", source, ["minimal_nonbatching"])
    output = info.value.compiler_output  # "nothing was loaded" in its message: test_error_messages
    assert f"minimal.cc:{broken_line}:" in output and "undeclared_name" in output
    assert info.value.backend == "minimal" and "/builds/" not in output
    assert cpp_server.repository.versions("minimal_nonbatching") == versions
    assert labkit.check_passthrough(cpp_server, "minimal_nonbatching").ok


def test_missing_execute_is_refused_before_triton(cpp_server):
    source = '#include "triton/core/tritonbackend.h"\nextern "C" int labkit_unused() { return 1; }\n'
    with pytest.raises(labkit.BuildError) as info:
        cpp_server.cpp_backend("minimal", source, ["minimal_nonbatching"])
    assert info.value.missing_exports == ["TRITONBACKEND_ModelInstanceExecute"]
    assert labkit.check_passthrough(cpp_server, "minimal_nonbatching").ok


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    "model", ["minimal_nonbatching", "minimal_batching", "recommended_batching", "custom_passthrough"]
)
def test_reference_models_answer(cpp_server, model, protocol):
    assert labkit.check_passthrough(cpp_server, model, protocol).ok


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", ["minimal_batching", "recommended_batching"])
def test_two_concurrent_requests_are_batched(cpp_server, model, protocol):
    before = labkit.model_stats(cpp_server, model, settle=True)
    mark = cpp_server.logs.mark()
    assert labkit.check_passthrough(cpp_server, model, protocol, concurrent=2).ok
    delta = labkit.model_stats(cpp_server, model, settle=True).since(before)
    assert delta.inference_count == 2
    assert delta.batch_counts == {2: 1}, delta.batch_counts
    if model == "minimal_batching":
        assert f"model {model}: requests in batch 2" in cpp_server.logs.since(mark)


def test_minimal_logs_every_execution(cpp_server):
    mark = cpp_server.logs.mark()
    labkit.check_passthrough(cpp_server, "minimal_nonbatching")
    assert "model minimal_nonbatching: requests in batch 1" in cpp_server.logs.since(mark)


def test_recommended_reports_statistics_and_its_own_metric(cpp_server):
    labkit.check_passthrough(cpp_server, "recommended_batching")
    stats = labkit.model_stats(cpp_server, "recommended_batching", settle=True)
    assert stats.execution_count > 0 and stats.inference_count > 0 and stats.batch_counts
    assert stats.phase_ns["compute_infer"] > 0
    text = cpp_server.models.metrics_text()
    assert re.search(r'^labkit_recommended\w*\{[^}]*model="recommended_batching"[^}]*\} [1-9]', text, re.M), text[
        -2000:
    ]


def test_recommended_rejects_mismatched_config(cpp_server):
    cfg = labkit.model_config(
        "recommended_bad",
        "recommended",
        [("INPUT", "FP32", [4, 4])],
        [("OUTPUT", "FP32", [2, 8])],
        max_batch_size=8,
        dynamic_batching=True,
    )
    cpp_server.repository.write_config(cfg)
    with pytest.raises(labkit.ModelLoadError) as info:
        cpp_server.cpp_backend("recommended", reference_source("recommended"), ["recommended_bad"])
    assert info.value.model == "recommended_bad" and ("dims" in info.value.reason or "shape" in info.value.reason)
    assert "recommended_bad" not in cpp_server.loaded_models()
    assert labkit.check_passthrough(cpp_server, "recommended_batching").ok
    assert labkit.check_add_sub(cpp_server).ok


def test_custom_passthrough_variable_length(cpp_server):
    x = np.random.default_rng(0).standard_normal((3, 5, 128)).astype(np.float32)
    out = labkit.infer(cpp_server, "custom_passthrough", {"INPUTTensor": x}, ["OUTPUTTensor"])
    np.testing.assert_array_equal(out["OUTPUTTensor"], x)
    config = cpp_server.model_config("custom_passthrough")
    assert config["instance_group"][0]["count"] == 2 and config["max_batch_size"] == 16


def test_rebuild_reloads_new_code_in_the_same_process(cpp_server):
    pid = cpp_server.runtime.triton_pid
    # minimal copies IN0 to OUT0; the edit makes it add 1000 on the way
    marker = "labkit-test-edit"
    edited = _add_thousand(MINIMAL) + f"\n// {marker}\n"
    served = cpp_server.cpp_backend("minimal", edited, ["minimal_nonbatching"])
    x = reference.sample_inputs("minimal_nonbatching")["IN0"]
    out = labkit.infer(cpp_server, "minimal_nonbatching", {"IN0": x})["OUT0"]
    np.testing.assert_array_equal(out, x + 1000)
    # back to the original: the old behaviour returns, again without a restart
    served_again = cpp_server.cpp_backend("minimal", MINIMAL, ["minimal_nonbatching"])
    assert served_again["minimal_nonbatching"] > served["minimal_nonbatching"]
    assert labkit.check_passthrough(cpp_server, "minimal_nonbatching").ok
    assert cpp_server.runtime.triton_pid == pid
    assert cpp_server.repository.versions("minimal_nonbatching") == [served_again["minimal_nonbatching"]]


EDIT_HOOK = "// (edit here: change `in` before it is sent back)"


def _add_thousand(source: str) -> str:
    """An edit of the minimal source that changes what it writes: every value + 1000."""
    assert EDIT_HOOK in source, "the minimal reference backend must keep its edit-here comment"
    return source.replace(EDIT_HOOK, "for (size_t k = 0; k < in.count<int32_t>(); ++k) in.data<int32_t>()[k] += 1000;")


def test_cell_magic_builds_and_loads(cpp_server):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "labkit")
    shell.run_cell_magic("triton_cpp", "minimal --models minimal_batching", MINIMAL)
    assert labkit.check_passthrough(cpp_server, "minimal_batching", concurrent=2).ok
    with pytest.raises(labkit.BuildError):
        shell.run_cell_magic("triton_cpp", "minimal --models minimal_batching", "this is not C++")
    assert labkit.check_passthrough(cpp_server, "minimal_batching").ok


def test_official_headers_option_needs_a_real_folder(tmp_path):
    with pytest.raises(labkit.errors.SetupError) as info:
        build_backend("minimal", MINIMAL, headers=tmp_path, cache=tmp_path, progress=False)
    assert info.value.missing == str(tmp_path / "triton" / "core" / "tritonbackend.h")
    # an include folder laid out like the NGC image's /opt/tritonserver/include is accepted
    official = tmp_path / "include"
    (official / "triton").mkdir(parents=True)
    import shutil

    shutil.copytree(INCLUDE_DIR / "triton" / "core", official / "triton" / "core")
    build = build_backend("minimal", MINIMAL, headers=official, cache=tmp_path / "c", progress=False)
    assert build.library.exists()


def test_a_fix_after_a_load_error_serves(cpp_server):
    """A (serving), then a source Triton refuses at load, then a correct B: B serves; going back to A
    (a build-cache hit) serves A. The refused library's path was dlopened by Triton: never reused."""
    scaling_model(cpp_server, "edited", "editloop")
    cpp_server.cpp_backend("editloop", scaling_source(2), progress=False)
    assert scaled_by(cpp_server, "edited") == 2
    with pytest.raises(labkit.ModelLoadError) as info:
        cpp_server.cpp_backend("editloop", scaling_source(5, refuse_load=True), progress=False)
    assert info.value.model == "edited"
    assert scaled_by(cpp_server, "edited") == 2  # the previous build keeps serving
    cpp_server.cpp_backend("editloop", scaling_source(3), progress=False)
    assert scaled_by(cpp_server, "edited") == 3
    cpp_server.cpp_backend("editloop", scaling_source(2), progress=False)  # from the build cache
    assert scaled_by(cpp_server, "edited") == 2
    with pytest.raises(labkit.ModelLoadError):
        cpp_server.cpp_backend("editloop", scaling_source(5, refuse_load=True), progress=False)
    cpp_server.cpp_backend("editloop", scaling_source(3), progress=False)  # cached too
    assert scaled_by(cpp_server, "edited") == 3
    assert len(cpp_server.repository.versions("edited")) == 1


def test_a_new_source_after_restart_serves(fresh_server):
    """restart() loads the library in the model's version folder into a new Triton process; the next
    build must not be copied over it (that overwrote a mapped library: SIGSEGV)."""
    scaling_model(fresh_server, "edited", "editloop")
    fresh_server.cpp_backend("editloop", scaling_source(2), progress=False)
    fresh_server.cpp_backend("editloop", scaling_source(3), progress=False)
    assert fresh_server.restart() == ["add_sub", "edited"]
    assert scaled_by(fresh_server, "edited") == 3
    pid = fresh_server.runtime.triton_pid
    fresh_server.cpp_backend("editloop", scaling_source(7), progress=False)
    assert scaled_by(fresh_server, "edited") == 7
    fresh_server.cpp_backend("editloop", scaling_source(3), progress=False)  # back to the one restart loaded
    assert scaled_by(fresh_server, "edited") == 3
    assert fresh_server.alive and fresh_server.runtime.triton_pid == pid and fresh_server.health.died is None


def test_a_load_error_on_the_first_install_leaves_the_version_folder_empty(fresh_server):
    scaling_model(fresh_server, "edited", "editloop")
    with pytest.raises(labkit.ModelLoadError):
        fresh_server.cpp_backend("editloop", scaling_source(5, refuse_load=True), progress=False)
    assert not list(fresh_server.repository.model_dir("edited").rglob("*.so"))
    fresh_server.cpp_backend("editloop", scaling_source(4), progress=False)
    assert scaled_by(fresh_server, "edited") == 4
    assert fresh_server.restart() == ["add_sub", "edited"] and scaled_by(fresh_server, "edited") == 4
