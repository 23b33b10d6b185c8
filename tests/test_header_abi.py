"""labkit's own declarations of the Triton 23.12 C API (labkit/native/include/triton/core) against
Triton's own r23.12 headers (read from the pinned core sources at test time) and the wheel's
libtritonserver: every function with the same type, every enum constant with the same value, every
callback type, the same API versions; and every function the server defines is exported by 2.41.0.

The comparison is the compiler's: one probe program, compiled once against each set of headers, prints
each function's type (as g++ spells it in __PRETTY_FUNCTION__: parameter and return types, enum tags,
pointer levels), each enum constant's value and each callback type; the two outputs must be equal."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from labkit.native import triton_sources
from labkit.native.build import INCLUDE_DIR
from labkit.native.toolchain import LocalToolchain

HEADERS = ("tritonserver.h", "tritonbackend.h")
_FUNCTION = re.compile(
    r"TRITON(?:SERVER|BACKEND)_(?P<kind>DECLSPEC|ISPEC)\s+[^;{}]*?\b(?P<name>TRITON[A-Z]+_\w+)\s*\(", re.S
)
_ENUM = re.compile(r"typedef\s+enum\s+\w+\s*\{(?P<body>[^}]*)\}\s*(?P<name>\w+)\s*;")
_CALLBACK = re.compile(r"typedef\s[^;]*?\(\s*\*\s*(?P<name>TRITON\w+_t)\s*\)")
_VERSIONS = (
    "TRITONSERVER_API_VERSION_MAJOR",
    "TRITONSERVER_API_VERSION_MINOR",
    "TRITONBACKEND_API_VERSION_MAJOR",
    "TRITONBACKEND_API_VERSION_MINOR",
)


def _code(path: Path) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S))


def _names(folder: Path) -> dict[str, dict[str, str]]:
    """From Triton's headers: functions (name -> DECLSPEC or ISPEC), enum types and constants, callbacks."""
    found: dict[str, dict[str, str]] = {"functions": {}, "enums": {}, "constants": {}, "callbacks": {}}
    for header in HEADERS:
        text = _code(folder / "triton" / "core" / header)
        for match in _FUNCTION.finditer(text):
            found["functions"][match["name"]] = match["kind"]
        for match in _ENUM.finditer(text):
            found["enums"][match["name"]] = header
            for constant in re.findall(r"\b(TRITON\w+)\b", match["body"]):
                found["constants"][constant] = match["name"]
        for match in _CALLBACK.finditer(text):
            found["callbacks"][match["name"]] = header
    return found


@pytest.fixture(scope="module")
def official_core(backend_examples) -> Path:  # backend_examples: skipped (failed under CI) without the sources
    return triton_sources.source("core") / "include"


@pytest.fixture(scope="module")
def probes(official_core, tmp_path_factory) -> dict[str, dict[tuple[str, str], str]]:
    """(function|type|value, name) -> what the compiler says of it, against labkit's headers and Triton's."""
    names = _names(official_core)
    lines = [
        "#include <cstdio>",
        '#include "triton/core/tritonbackend.h"',
        "template <class T> const char* type_of() { return __PRETTY_FUNCTION__; }",
        "int main() {",
    ]
    lines += [f'  std::printf("function %s %s\\n", "{n}", type_of<decltype({n})>());' for n in names["functions"]]
    lines += [f'  std::printf("type %s %s\\n", "{n}", type_of<{n}>());' for n in (*names["enums"], *names["callbacks"])]
    lines += [
        f'  std::printf("value %s %lld\\n", "{n}", static_cast<long long>({n}));'
        for n in (*names["constants"], *_VERSIONS)
    ]
    lines += ["}"]
    folder = tmp_path_factory.mktemp("abi")
    (folder / "probe.cc").write_text("\n".join(lines) + "\n")
    said = {}
    for label, include in (("labkit", INCLUDE_DIR), ("triton", official_core)):
        binary = folder / f"probe-{label}"
        built = subprocess.run(
            ["g++", "-std=c++17", "-Wall", f"-I{include}", str(folder / "probe.cc"), "-o", str(binary)],
            capture_output=True,
            text=True,
        )
        assert built.returncode == 0, f"against {label}'s headers:\n{built.stderr[-3000:]}"
        out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
        said[label] = {(kind, name): what for kind, name, what in (line.split(" ", 2) for line in out.splitlines())}
    return said


def test_the_probe_covers_all_of_23_12(official_core):
    names = _names(official_core)
    server = [n for n in names["functions"] if n.startswith("TRITONSERVER_")]
    backend = [n for n in names["functions"] if n.startswith("TRITONBACKEND_")]
    assert len(server) == 158 and len(backend) == 94  # 23.12's tritonserver.h and tritonbackend.h
    assert "TRITONSERVER_datatype_enum" not in names["enums"] and "TRITONSERVER_DataType" in names["enums"]
    assert names["constants"]["TRITONSERVER_TYPE_BF16"] == "TRITONSERVER_DataType"
    assert "TRITONSERVER_InferenceTraceActivityFn_t" in names["callbacks"]


def test_every_function_has_tritons_type(probes):
    functions = {key: said for key, said in probes["triton"].items() if key[0] == "function"}
    assert len(functions) == 158 + 94
    assert functions["function", "TRITONSERVER_ServerNew"].endswith(
        "TRITONSERVER_Error*(TRITONSERVER_Server**, TRITONSERVER_ServerOptions*)]"
    )  # what is compared
    differ = {
        name: (probes["labkit"][kind, name], said)
        for (kind, name), said in functions.items()
        if probes["labkit"][kind, name] != said
    }
    assert differ == {}


def test_every_enum_constant_callback_type_and_api_version_is_tritons(probes):
    assert probes["triton"]["value", "TRITONSERVER_API_VERSION_MINOR"] == "27"
    assert probes["triton"]["value", "TRITONBACKEND_API_VERSION_MINOR"] == "17"
    assert probes["triton"]["value", "TRITONSERVER_TRACE_LEVEL_TENSORS"] == "8"
    assert len([key for key in probes["triton"] if key[0] == "type"]) > 30
    differ = {
        key: (probes["labkit"][key], said) for key, said in probes["triton"].items() if probes["labkit"][key] != said
    }
    assert differ == {}


def _ours() -> dict[str, str]:
    found = {}
    for header in sorted((INCLUDE_DIR / "triton" / "core").glob("*.h")):
        found.update({m["name"]: m["kind"] for m in _FUNCTION.finditer(_code(header))})
    return found


def test_labkit_declares_the_functions_triton_does_and_no_others(official_core):
    # (Triton's header marks one server function, TRITONBACKEND_InferenceResponseOutputByName, as an
    # entry point; the marks are compared with the server library below instead.)
    assert sorted(_ours()) == sorted(_names(official_core)["functions"])


def test_labkit_headers_are_named_as_tritons(official_core):
    """Each of labkit's declaration files stands for one of Triton's by name and scope (so it is exempt
    from the 400-line cap), and the two Triton headers compared here are all of them."""
    ours = sorted(p.name for p in (INCLUDE_DIR / "triton" / "core").iterdir())
    tritons = {p.name for p in (official_core / "triton" / "core").glob("*.h")}
    assert ours == sorted(HEADERS) and set(ours) <= tritons


def test_what_the_server_defines_it_exports_and_entry_points_are_the_backends():
    library = LocalToolchain().triton_library()
    assert library, "the wheel's libtritonserver was not found"
    out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    ours = _ours()
    defined = {name for name, kind in ours.items() if kind == "DECLSPEC"}
    entry_points = {name for name, kind in ours.items() if kind == "ISPEC"}
    assert len(defined) == 158 + 94 - 13 and sorted(defined - exported) == []
    assert len(entry_points) == 13 and not entry_points & exported
