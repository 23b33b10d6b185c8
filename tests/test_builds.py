"""What a C++ build guarantees before Triton sees the library: real g++, no server needed."""

from __future__ import annotations

import multiprocessing
import shutil
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import labkit
from labkit.native import build, build_backend, reference_source
from labkit.native.build import dynamic_symbols

MINIMAL = reference_source("minimal").read_text()


@pytest.mark.parametrize("backend", ["minimal", "recommended", "custom"])
def test_only_entry_points_are_exported(tmp_path, backend):
    library = build_backend(backend, reference_source(backend), cache=tmp_path, progress=False).library
    exported, undefined = dynamic_symbols(library)
    assert exported and all(name.startswith("TRITONBACKEND_") for name in exported), sorted(exported)
    assert not any(name.startswith("_ZNSt") or name.startswith("_ZN6labkit") for name in exported)
    assert "TRITONBACKEND_ResponseNew" in undefined  # from the helper layer linked in


def test_a_call_that_23_12_lacks_is_refused(tmp_path):
    # A function of a later Triton (double-valued response parameters), declared by hand as a newer header would.
    source = MINIMAL.replace(
        '#include "labkit/backend.hpp"',
        (
            '#include "labkit/backend.hpp"\n'
            'extern "C" TRITONSERVER_Error* TRITONBACKEND_ResponseSetDoubleParameter(TRITONBACKEND_Response*, const char*, double);'
        ),
    ).replace(
        'batch.output("OUT0", in);',
        'batch.output("OUT0", in);\n    labkit::check(TRITONBACKEND_ResponseSetDoubleParameter(batch.response(0), "x", 1.0));',
    )
    with pytest.raises(labkit.BuildError) as info:
        build_backend("newer", source, cache=tmp_path, progress=False)
    assert info.value.unavailable == ["TRITONBACKEND_ResponseSetDoubleParameter"] and info.value.backend == "newer"
    assert not list((tmp_path / "newer").glob("*/libtriton_newer.so"))


def test_cache_key_covers_the_contents_of_include_folders(tmp_path):
    include = tmp_path / "include"
    include.mkdir()
    (include / "offset.h").write_text("#define OFFSET 1\n")
    source = '#include "offset.h"\n' + MINIMAL.replace(
        "// (edit here: change `in` before it is sent back)", "in.data<int32_t>()[0] += OFFSET;"
    )
    first = build_backend("offsetting", source, cache=tmp_path / "c", extra_includes=[str(include)], progress=False)
    again = build_backend("offsetting", source, cache=tmp_path / "c", extra_includes=[str(include)], progress=False)
    assert again.cached and again.digest == first.digest
    (include / "offset.h").write_text("#define OFFSET 2\n")
    changed = build_backend("offsetting", source, cache=tmp_path / "c", extra_includes=[str(include)], progress=False)
    assert not changed.cached and changed.digest != first.digest


def test_cache_key_covers_the_nlohmann_json_headers(tmp_path, monkeypatch):
    first = build_backend("minimal", MINIMAL, cache=tmp_path / "c", progress=False)
    other = tmp_path / "nlohmann"
    shutil.copytree(build.json_include(), other)
    with open(other / "nlohmann" / "json_fwd.hpp", "a") as header:
        header.write("\n// another release\n")
    monkeypatch.setattr(build, "json_include", lambda: other)
    second = build_backend("minimal", MINIMAL, cache=tmp_path / "c", progress=False)
    assert not second.cached and second.digest != first.digest


def test_first_line_numbers_compiler_messages_as_the_editor_does(tmp_path):
    cell = MINIMAL + "\nint broken() { return undeclared_name; }\n"
    body_line = cell.splitlines().index("int broken() { return undeclared_name; }") + 1
    with pytest.raises(labkit.BuildError) as info:
        build_backend("minimal", cell, cache=tmp_path, progress=False, first_line=2)  # under a %%triton_cpp line
    assert f"minimal.cc:{body_line + 1}:" in info.value.compiler_output, info.value.compiler_output


def test_debug_build_keeps_local_variables_for_gdb(tmp_path):
    def locals_in(library) -> bool:
        info = subprocess.run(["readelf", "--debug-dump=info", str(library)], capture_output=True, text=True).stdout
        return "DW_TAG_formal_parameter" in info and ": batch" in info

    optimized = build_backend("minimal", MINIMAL, cache=tmp_path, progress=False)
    debug = build_backend("minimal", MINIMAL, cache=tmp_path, progress=False, debug=True)
    assert debug.digest != optimized.digest
    assert locals_in(debug.library) and not locals_in(optimized.library)


def _build_in_another_process(cache: str) -> tuple[str, bool]:
    built = build_backend("minimal", MINIMAL, cache=Path(cache), progress=False)
    return str(built.library), built.cached


def test_two_processes_building_the_same_source_share_one_build(tmp_path):
    # Parallel test workers and two notebooks build the same source into one cache: one compiles, the
    # other waits for it and takes its library (they once wrote the same object files at once).
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_build_in_another_process, [str(tmp_path)] * 2))
    assert results[0][0] == results[1][0]
    assert sorted(cached for _, cached in results) == [False, True]
    exported, _ = dynamic_symbols(Path(results[0][0]))
    assert "TRITONBACKEND_ModelInstanceExecute" in exported
