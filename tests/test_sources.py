"""Sources the way they come: a cell, a .cc path, a list of files, a folder (multi-file backends with
headers beside them), and batching-strategy libraries, which export TRITONBACKEND_ModelBatch* and no
ModelInstanceExecute. Real g++; Triton's r23.12 examples are read from the pinned backend archive
(LABKIT_TRITON_SOURCES, as tests/conftest.py sets it) at test time. No server is started here."""

from __future__ import annotations

from pathlib import Path

import pytest

import labkit
import labkit.errors
from labkit.native import build_backend, reference_source
from labkit.native.build import BATCH_ENTRY_POINTS, dynamic_symbols
from labkit.native.sources import collect
from labkit.native.symbols import display_file

MINIMAL = reference_source("minimal").read_text()


def _split_minimal(folder: Path) -> None:
    """The reference minimal backend split into two files and a header, as a person's project might be."""
    anchor = "TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute("
    assert anchor in MINIMAL
    head, execute = MINIMAL.split(anchor, 1)
    folder.mkdir()
    (folder / "answer.h").write_text("#pragma once\nint answer();\n")
    (folder / "answer.cpp").write_text('#include "answer.h"\nint answer() { return 42; }\n')
    (folder / "minimal.cc").write_text(
        f'#include "answer.h"\n{head}static int unused_answer() {{ return answer(); }}\n{anchor}{execute}'
    )


def test_a_folder_builds_every_source_in_it_with_its_headers(tmp_path):
    _split_minimal(tmp_path / "src")
    built = build_backend("split", tmp_path / "src", cache=tmp_path / "c", progress=False)
    assert "TRITONBACKEND_ModelInstanceExecute" in dynamic_symbols(built.library)[0]
    assert sorted(p.name for p in (built.library.parent / "src").iterdir() if p.suffix in (".cc", ".cpp", ".h")) == [
        "answer.cpp",
        "answer.h",
        "minimal.cc",
    ]
    # the same files as a list (str paths and Paths) are the same build, answered from the cache
    again = build_backend(
        "split",
        [str(tmp_path / "src" / "minimal.cc"), tmp_path / "src" / "answer.cpp"],
        cache=tmp_path / "c",
        progress=False,
    )
    assert again.cached and again.digest == built.digest
    # a header changed beside the sources is a new build
    (tmp_path / "src" / "answer.h").write_text("#pragma once\nint answer();  // changed\n")
    assert not build_backend("split", tmp_path / "src", cache=tmp_path / "c", progress=False).cached


def test_compiler_messages_name_the_file_and_its_own_line(tmp_path):
    _split_minimal(tmp_path / "src")
    (tmp_path / "src" / "answer.cpp").write_text('#include "answer.h"\n\nint answer() { return undeclared; }\n')
    with pytest.raises(labkit.BuildError) as info:
        build_backend("split", tmp_path / "src", cache=tmp_path / "c", progress=False, first_line=2)
    assert info.value.backend == "split"
    assert "answer.cpp:3:" in info.value.compiler_output, info.value.compiler_output
    assert str(tmp_path / "c") not in info.value.compiler_output


def test_a_cell_compiled_with_files_keeps_the_editor_lines_and_sees_their_headers(tmp_path):
    _split_minimal(tmp_path / "src")
    cell = '#include "answer.h"\nint from_cell() { return answer() + missing_name; }\n'
    with pytest.raises(labkit.BuildError) as info:
        build_backend("split", [tmp_path / "src", cell], cache=tmp_path / "c", progress=False, first_line=2)
    assert "split.cc:3:" in info.value.compiler_output and "missing_name" in info.value.compiler_output
    assert "answer.h" not in info.value.compiler_output  # the header was found


def test_text_and_paths_are_told_apart(tmp_path):
    assert collect(MINIMAL).cell == MINIMAL and collect("").cell == ""
    assert collect("int x;", first_line=2).cell == "#line 2\nint x;"
    with pytest.raises(labkit.errors.SetupError) as info:
        collect(str(tmp_path / "nowhere.cc"))
    assert info.value.missing == str(tmp_path / "nowhere.cc") and info.value.reason == "no such file"
    (tmp_path / "empty").mkdir()
    with pytest.raises(labkit.errors.SetupError) as info:
        collect(tmp_path / "empty")
    assert info.value.reason == "no C++ sources"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.cc").write_text("int x;\n")
    with pytest.raises(labkit.errors.ConfigError) as info:
        collect([tmp_path / "a", tmp_path / "b"])
    assert (info.value.field, info.value.value) == ("source", "same.cc")
    with pytest.raises(labkit.errors.ConfigError) as info:
        collect(["int a;\n", "int b;\n"])
    assert info.value.field == "source"


def test_a_crash_in_a_file_built_from_disk_is_the_authors_code():
    assert display_file("/cache/bls/0123456789abcdef/src/bls_utils.cc", "bls") == ("bls_utils.cc", True)
    assert display_file("/usr/include/c++/12/bits/stl_vector.h", "bls") == ("stl_vector.h", False)


def test_official_bls_builds_from_its_folder(backend_examples, tmp_path):
    built = build_backend("bls", backend_examples / "backends" / "bls" / "src", cache=tmp_path, progress=False)
    assert "TRITONBACKEND_ModelInstanceExecute" in dynamic_symbols(built.library)[0]


def test_a_batching_strategy_needs_no_execute_but_all_five_batch_functions(backend_examples, tmp_path):
    source = backend_examples / "batching_strategies" / "volume_batching" / "src" / "volume_batching.cc"
    built = build_backend("volumebatching", source, cache=tmp_path, progress=False)  # unchanged, no required=
    exported = dynamic_symbols(built.library)[0]
    assert set(BATCH_ENTRY_POINTS) <= exported and "TRITONBACKEND_ModelInstanceExecute" not in exported
    text = source.read_text()
    cut = text.replace("TRITONBACKEND_ModelBatchFinalize(void* userp)", "unused_finalize(void* userp)")
    assert cut != text
    with pytest.raises(labkit.BuildError) as info:  # four of five: not a strategy, so Execute is missing
        build_backend("volumebatching", cut, cache=tmp_path, progress=False)
    assert info.value.missing_exports == ["TRITONBACKEND_ModelInstanceExecute"]
    assert "lacks TRITONBACKEND_ModelBatchFinalize" in info.value.remedy
    with pytest.raises(labkit.BuildError) as info:
        build_backend("volumebatching", cut, cache=tmp_path, progress=False, required=BATCH_ENTRY_POINTS)
    assert info.value.missing_exports == ["TRITONBACKEND_ModelBatchFinalize"]
    with pytest.raises(labkit.BuildError) as info:  # neither kind of library: Execute is what is missing
        build_backend("nothing", "int x;\n", cache=tmp_path, progress=False)
    assert info.value.missing_exports == ["TRITONBACKEND_ModelInstanceExecute"]


def test_the_magic_takes_files_and_compiles_a_nonempty_cell_with_them(monkeypatch, tmp_path):
    from labkit import magics

    calls = []

    class Recorder:  # stands in for the server: the magic's part is what it hands to cpp_backend
        def cpp_backend(self, backend, source, models, **options):
            calls.append((backend, source, options["first_line"]))
            return {}

    monkeypatch.setattr(magics, "current", lambda: Recorder())
    magics.triton_cpp(f"bls --sources {tmp_path}/src {tmp_path}/extra.cc", "\n")
    magics.triton_cpp(f"bls --debug --sources {tmp_path}/src", "int from_cell();\n")
    magics.triton_cpp("minimal", MINIMAL)
    assert calls == [
        ("bls", [tmp_path / "src", tmp_path / "extra.cc"], 2),
        ("bls", [tmp_path / "src", "int from_cell();\n"], 2),
        ("minimal", MINIMAL, 2),
    ]
    with pytest.raises(labkit.errors.ConfigError) as info:
        magics.triton_cpp("bls --sources", "")
    assert info.value.field == "%%triton_cpp" and "--sources" in info.value.remedy
