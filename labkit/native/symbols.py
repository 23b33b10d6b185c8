"""Where in a backend's source an address is: library + offset -> function, file and line.

Backends are built with line tables (``-g1``; ``-g`` in debug builds), and a cell's line numbers are
its editor lines (build_backend's ``first_line``), so the line found here is the one the person
sees in the notebook. The mapping is addr2line's, run on this machine on the library file itself
(the build cache and the model repository are on this machine even when Triton runs in a container).
Inlined functions are listed the way ``addr2line -i`` lists them: the inlined function at its line,
then the function it was inlined into at the line of the call. elfutils' ``eu-addr2line`` (or
LLVM's) is preferred: GNU binutils' 2.40 names the innermost inlined function after the symbol that
holds its code (a crash in ``poke()`` inlined into a lambda was "in a lambda"); it is the fallback.

Anything that has frames as (library, offset) can use it: the crash handler's report
(labkit.native.crash), or the frames of a live thread that is stuck (a gdb backtrace gives absolute
addresses; subtract the library's load address from ``info sharedlibrary`` or /proc/PID/maps).

    >>> locate("/repo/m/3/libtriton_m.so", [0x1a2b], returns=False)
    [[SourceLine(function='poke', file='m.cc', line=4, user=True, inlined=True),
      SourceLine(function='operator()', file='m.cc', line=10, user=True), ...]]
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

#: The helper layer's sources (labkit/native/src): shown as labkit's, never as the user's.
HELPER_SOURCES = (
    "labkit_backend.cc",
    "labkit_batch.cc",
    "labkit_crash.cc",
    "labkit_tensors.cc",
    "backend.hpp",
    "batch.hpp",
    "errors.hpp",
    "json.hpp",
    "metrics.hpp",
    "model.hpp",
    "tensors.hpp",
)
_LIBRARY = re.compile(r"libtriton_(?P<backend>[A-Za-z0-9_.-]+)\.so$")
#: addr2line programs, best first; each prints addr2line's -a -f -i format (elfutils' with columns,
#: and "f inlined at file:line:column in symbol" for an inlined function).
ADDR2LINE = ("eu-addr2line", "llvm-addr2line", "addr2line")
_POSITION = re.compile(r"^(?P<path>.+?):(?P<line>\d+)(?::\d+)?(?:\s.*)?$")


@dataclass(frozen=True)
class SourceLine:
    """One source position: ``file`` is shown as the person knows it (``<backend>.cc`` for the cell,
    ``labkit/<file>`` for the helper layer, the base name otherwise); ``user`` marks the cell's own code."""

    function: str
    file: str
    line: int
    user: bool
    inlined: bool = False  # this function was inlined into the next position's function, at its line

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {short_function(self.function)}"


def short_function(name: str) -> str:
    """A demangled name without template arguments and parameters; "a lambda" for a lambda."""
    if "{lambda" in name:
        return "a lambda"
    if name.startswith("operator") and "(" in name[len("operator") + 2 :]:
        name = name[: name.index("(", len("operator") + 2)]  # operator()(int) -> operator()
    if name.startswith("operator"):
        return name
    out, depth = [], 0
    for char in name:
        depth += char in "<(["
        if depth == 0:
            out.append(char)
        depth -= char in ">)]"
    return "".join(out).strip() or name


def backend_of(library: str) -> str | None:
    """The backend a library belongs to (``libtriton_<backend>.so``), or None for other libraries."""
    match = _LIBRARY.search(PurePosixPath(library).name)
    return match.group("backend") if match else None


def display_file(path: str, backend: str | None) -> tuple[str, bool]:
    """How to show a source path from the line tables, and whether it is the backend author's own."""
    name = PurePosixPath(path).name
    if name in HELPER_SOURCES and "labkit" in path:
        return f"labkit/{name}", False
    if backend is not None and name == f"{backend}.cc":
        return name, True
    parts = PurePosixPath(path).parts  # a file built from disk: <cache>/<backend>/<digest>/src/<name>
    if backend is not None and len(parts) >= 4 and parts[-2] == "src" and parts[-4] == backend:
        return name, True
    return name, False


def locate(library: str, offsets: Sequence[int], *, returns: bool = True) -> list[list[SourceLine]]:
    """For each offset into ``library`` (a path on this machine), its source positions, innermost
    first (an inlined function, then the function it was inlined into). ``returns``: the offsets are
    return addresses (frames of a backtrace other than the innermost), so the call itself is one
    byte earlier. An empty list where nothing is known (no line tables, no addr2line, no file)."""
    tool = next((found for name in ADDR2LINE if (found := shutil.which(name))), None)
    if tool is None or not offsets:
        return [[] for _ in offsets]
    wanted = [max(0, o - 1) if returns else o for o in offsets]
    try:
        proc = subprocess.run(
            [
                tool,
                "--addresses",
                "--functions",
                "--inlines",
                "--demangle",
                "--exe",
                library,
                *(hex(o) for o in wanted),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return [[] for _ in offsets]
    if proc.returncode != 0:
        return [[] for _ in offsets]
    return _parse(proc.stdout, len(offsets), backend_of(library))


def _parse(output: str, count: int, backend: str | None) -> list[list[SourceLine]]:
    # addr2line -a -f -i prints, per address: the address, then (function, file:line) pairs.
    groups: list[list[str]] = []
    for line in output.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line.strip()):
            groups.append([])
        elif groups:
            groups[-1].append(line.strip())
    found: list[list[SourceLine]] = []
    for group in groups[:count]:
        lines = []
        for function, position in zip(group[0::2], group[1::2]):
            match = _POSITION.match(position)
            if match is None or match["path"] == "??" or match["line"] == "0":
                continue
            shown, user = display_file(match["path"], backend)
            function = function.split(" inlined at ", 1)[0]  # elfutils names the caller there too
            lines.append(SourceLine(function if function != "??" else "?", shown, int(match["line"]), user))
        # every position but the last is a function inlined into the next one
        found.append([replace(s, inlined=True) for s in lines[:-1]] + lines[-1:])
    return found + [[] for _ in range(count - len(found))]
