"""``defines`` of a build from sources (``build_backend(..., defines=)``, ``labkit build-backend --define``,
``%%triton_cpp --define``): each a -DNAME=VALUE for the real g++, seen in what a real Triton 2.41 serves;
a source that needs a macro it was not given fails at its line (BuildError's ``file`` and ``line``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import labkit
import labkit.errors
from labkit.native import build_backend
from labkit.native.defines import compiler_flags, parse

NEEDS_FACTOR = "#error the build must define FACTOR"
SCALED = f"""#include "labkit/backend.hpp"
#ifndef FACTOR
{NEEDS_FACTOR}
#endif
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {{
  return labkit::execute(instance, requests, count, [](labkit::Batch& batch) {{
    labkit::Tensor in = batch.input("IN0");
    for (size_t k = 0; k < in.count<int32_t>(); ++k) in.data<int32_t>()[k] *= FACTOR;
    batch.output("OUT0", in);
  }});
}}
"""
ERROR_LINE = SCALED.splitlines().index(NEEDS_FACTOR) + 1
X = np.array([1, 2, 3, 4], dtype=np.int32)


def test_a_define_reaches_the_compiler_and_a_missing_one_fails_at_its_line(tmp_path):
    with pytest.raises(labkit.BuildError) as info:
        build_backend("scaled", SCALED, cache=tmp_path, progress=False)
    assert (info.value.file, info.value.line) == ("scaled.cc", ERROR_LINE)
    three = build_backend("scaled", SCALED, cache=tmp_path, progress=False, defines={"FACTOR": "3"})
    four = build_backend("scaled", SCALED, cache=tmp_path, progress=False, defines=["FACTOR=4"])
    assert three.library.exists() and four.digest != three.digest
    assert build_backend("scaled", SCALED, cache=tmp_path, progress=False, defines=["FACTOR=3"]).cached


def test_defines_are_parsed_and_checked_before_anything_runs():
    assert parse(["A=1", "B:BOOL=ON", "C=x=y", "A=2", "EMPTY="]) == {"A": "2", "B:BOOL": "ON", "C": "x=y", "EMPTY": ""}
    assert parse({"TRITON_ENABLE_METRICS": "OFF"}) == {"TRITON_ENABLE_METRICS": "OFF"}
    assert compiler_flags(["N=4", "NAME=a b"]) == ["-DN=4", "-DNAME=a b"]
    for bad, field_value in [(["=1"], "=1"), (["NOVALUE"], "NOVALUE")]:
        with pytest.raises(labkit.errors.ConfigError) as info:
            parse(bad)
        assert (info.value.field, info.value.value) == ("define", field_value)
    with pytest.raises(labkit.errors.ConfigError) as info:  # a CMake name, but no macro name
        compiler_flags(["FETCHCONTENT_SOURCE_DIR_REPO-CORE=/x"])
    assert (info.value.field, info.value.value) == ("define", "FETCHCONTENT_SOURCE_DIR_REPO-CORE")


def test_the_cli_passes_defines_to_a_source_build(tmp_path):
    source = tmp_path / "scaled.cc"
    source.write_text(SCALED)
    run = [sys.executable, "-m", "labkit.cli", "build-backend", "scaled", str(source), "--out", str(tmp_path / "out")]
    assert (
        subprocess.run(run, check=False, capture_output=True, text=True, timeout=300).returncode == 3
    )  # FACTOR missing
    assert not (tmp_path / "out").exists()
    proc = subprocess.run([*run, "--define", "FACTOR=2"], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "out" / "scaled" / "libtriton_scaled.so").is_file()


def test_the_magic_passes_defines_and_the_served_model_follows_them(fresh_server):
    from IPython.core.interactiveshell import InteractiveShell

    fresh_server.repository.write_config(
        labkit.model_config("scaled_model", "scaled", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    )
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "labkit")
    shell.run_cell_magic("triton_cpp", "scaled --define FACTOR=3", SCALED)
    np.testing.assert_array_equal(labkit.infer(fresh_server, "scaled_model", {"IN0": X})["OUT0"], X * 3)
    shell.run_cell_magic("triton_cpp", "scaled --define FACTOR=5", SCALED)
    np.testing.assert_array_equal(labkit.infer(fresh_server, "scaled_model", {"IN0": X})["OUT0"], X * 5)
    with pytest.raises(labkit.BuildError) as info:  # no FACTOR: the cell's own line (the magic is line 1)
        shell.run_cell_magic("triton_cpp", "scaled", SCALED)
    assert (info.value.file, info.value.line) == ("scaled.cc", ERROR_LINE + 1)
    with pytest.raises(labkit.errors.ConfigError) as bad:
        shell.run_cell_magic("triton_cpp", "scaled --define 5=FACTOR", SCALED)
    assert bad.value.field == "define"
    np.testing.assert_array_equal(labkit.infer(fresh_server, "scaled_model", {"IN0": X})["OUT0"], X * 5)
