"""Official mode: Triton's own r23.12 example backends (backend repository, examples/backends/minimal
and recommended), taken unchanged from the pinned archive, build through labkit against Triton's
headers and utilities, serve their official model repositories in the embedded 2.41 server, and pass
their official clients. The archive is read at test time (LABKIT_TRITON_SOURCES, as .ci/run sets it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
import labkit.errors
import labkit.server
from labkit.native import build_backend
from labkit.native.build import latest_build


def _printed(stdout: str, names: tuple[str, ...]) -> list[str]:
    """The arrays a client printed after ``NAME = `` (numpy's multi-line form: later lines indented)."""
    return re.findall(rf"(?:{'|'.join(names)}) = (\[.*?\])\n(?! )", stdout, flags=re.DOTALL)


def _readelf(library: Path) -> str:
    return subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
@pytest.mark.parametrize("example", ["minimal", "recommended"])
def test_official_example_serves_its_client(backend_examples, example, tmp_path):
    repository = tmp_path / f"{example}_models"
    shutil.copytree(backend_examples / "model_repos" / f"{example}_models", repository)
    models = sorted(p.name for p in repository.iterdir() if (p / "config.pbtxt").is_file())
    source = (backend_examples / "backends" / example / "src" / f"{example}.cc").read_text()
    with labkit.server.EmbeddedServer(repository=repository) as srv:
        srv.start()
        served = srv.cpp_backend(example, source)
        assert sorted(served) == models
        client = backend_examples / "clients" / f"{example}_client"
        proc = subprocess.run(
            [sys.executable, str(client), "-u", srv.endpoints.http_url], capture_output=True, text=True, timeout=120
        )
        if example == "recommended":  # built as Triton's CMake builds it: with statistics on
            assert labkit.model_stats(srv, "batching", settle=True).execution_count > 0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the clients print what they sent and what came back (they check nothing): both examples echo
    sent, answered = _printed(proc.stdout, ("IN0", "input")), _printed(proc.stdout, ("OUT0", "OUTPUT"))
    assert len(sent) == {"minimal": 3, "recommended": 2}[example]
    assert answered == sent, proc.stdout
    library = latest_build(example).library
    # TRITONSERVER_/TRITONBACKEND_ calls resolve from the running server: no link to its library
    assert "tritonserver" not in _readelf(library)


def test_a_call_nothing_defines_fails_the_build_at_its_line(backend_examples, tmp_path):
    source = (backend_examples / "backends" / "minimal" / "src" / "minimal.cc").read_text()
    anchor = "ModelState::Create(TRITONBACKEND_Model* triton_model, ModelState** state)\n{\n"
    assert anchor in source
    line = source[: source.index(anchor) + len(anchor)].count("\n") + 1
    broken = "void not_defined_anywhere(int);\n" + source.replace(anchor, anchor + "  not_defined_anywhere(1);\n")
    with pytest.raises(labkit.BuildError) as info:
        build_backend("minimal", broken, cache=tmp_path, progress=False)
    assert info.value.undefined == ["not_defined_anywhere(int)"]
    assert f"minimal.cc:{line + 1}: undefined reference" in info.value.compiler_output


def test_official_headers_without_sources_is_a_setup_error_saying_what_to_set(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_TRITON_SOURCES", str(tmp_path))
    with pytest.raises(labkit.errors.SetupError) as info:
        build_backend("minimal", '#include "triton/backend/backend_common.h"\n', cache=tmp_path, progress=False)
    assert info.value.missing == str(tmp_path / "core-include-r23.12.tar.gz")
    assert info.value.reason == "no such file" and "LABKIT_TRITON_SOURCES" in info.value.remedy
