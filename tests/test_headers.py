"""labkit's own declarations of the Triton 23.12 C API (labkit/native/include/triton/core) and its
helper headers: what backend authors need is there, and every header compiles alone, as C and C++."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from labkit.native import cuda_kit
from labkit.native.build import INCLUDE_DIR, json_include

CORE = INCLUDE_DIR / "triton" / "core"
_DECLARED = re.compile(
    r"TRITON(?:SERVER|BACKEND)_(?P<kind>DECLSPEC|ISPEC)\s+[^;{}]*?\b(?P<name>TRITON[A-Z]+_\w+)\s*\(", re.S
)


def _declarations() -> dict[str, str]:
    """Every function the headers declare -> DECLSPEC (the server defines it) or ISPEC (an entry point)."""
    found = {}
    for header in sorted(CORE.glob("*.h")):  # tritonserver.h and tritonbackend.h, as Triton names them
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        for match in _DECLARED.finditer(text):
            found[match["name"]] = match["kind"]
    return found


# Every function against Triton's own r23.12 headers and the server library: tests/test_header_abi.py.


def test_what_backend_authors_need_is_declared():
    declared = _declarations()
    for name in [
        # buffer attributes: needed by the memory-usage and input/output-attribute calls
        "TRITONSERVER_BufferAttributesNew",
        "TRITONSERVER_BufferAttributesByteSize",
        "TRITONBACKEND_ModelReportMemoryUsage",
        # state tensors (sequence batching with implicit state)
        "TRITONBACKEND_StateNew",
        "TRITONBACKEND_StateBuffer",
        "TRITONBACKEND_StateUpdate",
        # the in-process inference request API of C++ BLS
        "TRITONBACKEND_ModelServer",
        "TRITONSERVER_InferenceRequestNew",
        "TRITONSERVER_InferenceRequestAppendInputData",
        "TRITONSERVER_InferenceRequestSetResponseCallback",
        "TRITONSERVER_ResponseAllocatorNew",
        "TRITONSERVER_InferenceResponseOutput",
        "TRITONSERVER_ServerInferAsync",
    ]:
        assert name in declared, name
    server_h = (CORE / "tritonserver.h").read_text()
    assert re.search(r"TRITONSERVER_REQUEST_RELEASE_RESCHEDULE\s*=\s*2\b", server_h)


@pytest.mark.parametrize("header", sorted(p.name for p in CORE.glob("*.h")))
@pytest.mark.parametrize("language", ["c", "c++"])
def test_headers_compile_alone(tmp_path: Path, language: str, header: str):
    source = tmp_path / ("check.c" if language == "c" else "check.cc")
    source.write_text(f'#include "triton/core/{header}"\n')
    compiler = "gcc" if language == "c" else "g++"
    proc = subprocess.run(
        [compiler, "-fsyntax-only", "-Wall", "-Wextra", f"-I{INCLUDE_DIR}", str(source)], capture_output=True, text=True
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr


@pytest.mark.parametrize("header", sorted(p.name for p in (INCLUDE_DIR / "labkit").glob("*.hpp")))
def test_helper_headers_compile_alone(tmp_path: Path, header: str):
    source = tmp_path / "check.cc"
    source.write_text(f'#include "labkit/{header}"\n')
    # cuda.hpp belongs to CUDA builds: it needs LABKIT_CUDA and cudart's headers (`labkit setup --cuda`)
    cuda = [f"-I{cuda_kit.locate().include}", "-DLABKIT_CUDA"] if header == "cuda.hpp" else []
    proc = subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-fsyntax-only",
            "-Wall",
            "-Wextra",
            f"-I{INCLUDE_DIR}",
            f"-I{json_include()}",
            *cuda,
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr


def test_cuda_header_refuses_a_build_without_cuda(tmp_path: Path):
    source = tmp_path / "check.cc"
    source.write_text('#include "labkit/cuda.hpp"\n')
    proc = subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", f"-I{INCLUDE_DIR}", f"-I{json_include()}", str(source)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "--cuda" in proc.stderr  # the #error names the flag to add


def test_no_cpp_file_of_labkit_is_over_400_lines():
    package = INCLUDE_DIR.parents[1]  # labkit/
    sources = [
        Path(folder) / name
        for folder, _, names in os.walk(package, followlinks=True)  # model_repository is a link
        for name in names
        if Path(name).suffix in {".h", ".hpp", ".cc", ".cpp"}
    ]
    assert any(p.name == "backend.hpp" for p in sources)
    # Headers in triton/core stand for Triton's own, by name and scope (test_header_abi.py checks that
    # Triton has each); tests/unit/test_architecture.py exempts them from the cap too.
    sources = [p for p in sources if p.parent != CORE]
    too_long = {str(p.relative_to(package)): n for p in sources if (n := len(p.read_text().splitlines())) > 400}
    assert too_long == {}
