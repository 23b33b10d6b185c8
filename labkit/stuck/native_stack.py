"""Where a C++ backend is right now: ``eu-stack`` of Triton's threads, keeping the threads that run
code of the model's library and, in them, the frames of the cell's source, at the cell's lines.

labkit builds backends with line tables (``-g1``) and gives each model its own copy of the library
(``<model>/<version>/libtriton_<backend>.so``), so a frame's module names the model, and its source
file is shown as labkit.native.symbols shows a crash's (``<backend>.cc:<line>``, the cell's lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ..native.symbols import display_file
from ..repository.files import source_line
from .debuggers import EU_STACK, Beside, missing_text

_THREAD = re.compile(r"^TID (\d+):$")
_FRAME = re.compile(r"^#(\d+)\s+0x[0-9a-f]+\s+(.*?)(?: - (/\S.*))?$")
_SOURCE = re.compile(r"^\s+(\S.*?):(\d+)(?::\d+)?$")


@dataclass
class StackFrame:
    """One frame of a live Triton thread as eu-stack names it: function, module (library path), and
    its source file and line when the module has line tables. A crashed process's frame (library and
    offset only) is labkit.native.crash.CrashFrame."""

    function: str
    module: str
    source: str = ""
    line: int = 0


@dataclass
class Thread:
    tid: int
    frames: list[StackFrame] = field(default_factory=list)


def parse_eu_stack(text: str) -> list[Thread]:
    """Threads and frames from ``eu-stack -i -m -s`` (function, module path, source file and line)."""
    threads: list[Thread] = []
    for row in text.splitlines():
        if match := _THREAD.match(row):
            threads.append(Thread(int(match.group(1))))
        elif threads and (match := _FRAME.match(row)):
            threads[-1].frames.append(StackFrame(match.group(2).strip(), match.group(3) or ""))
        elif threads and threads[-1].frames and (match := _SOURCE.match(row)):
            threads[-1].frames[-1].source, threads[-1].frames[-1].line = match.group(1), int(match.group(2))
    return threads


def _in_model(frame: StackFrame, model: str, backend: str) -> bool:
    path = PurePosixPath(frame.module)
    return path.name == f"libtriton_{backend}.so" and model in path.parts


def describe_threads(threads: list[Thread], model: str, backend: str) -> str:
    """The threads running ``model``'s library, each with its cell frames (innermost last)."""
    parts = []
    for thread in threads:
        lines = []
        for frame in reversed(thread.frames):
            shown, users = display_file(frame.source, backend)
            if users and frame.line and _in_model(frame, model, backend):
                text = source_line(frame.source, frame.line)
                lines.append(f"    {shown}:{frame.line} in {frame.function}" + (f":  {text}" if text else ""))
        if not lines:  # inside the library, but not in the cell's own lines (e.g. labkit's helpers)
            inner = next(f for f in thread.frames if _in_model(f, model, backend))
            lines.append(f"    in {inner.function} (libtriton_{backend}.so, outside the cell's lines)")
        parts.append(
            f"  Triton thread {thread.tid} running {model!r} ({backend}), innermost last:\n" + "\n".join(lines)
        )
    return "\n".join(parts)


def innermost_line(threads: list[Thread], model: str, backend: str) -> str:
    """The innermost cell line any of ``threads`` is at, as ``<backend>.cc:<line>`` ("" if none)."""
    for thread in threads:
        for frame in thread.frames:  # eu-stack lists the innermost frame first
            shown, users = display_file(frame.source, backend)
            if users and frame.line and _in_model(frame, model, backend):
                return f"{shown}:{frame.line}"
    return ""


def busy_threads(beside: Beside, model: str, backend: str) -> tuple[list[Thread], str]:
    """Triton's threads inside ``model``'s library, and why none could be read ("" if they could)."""
    tool = beside.debug_tool(EU_STACK)
    if tool is None:
        return [], missing_text(beside, EU_STACK)
    if beside.triton_pid is None:
        return [], ""
    code, out, err = beside.run_beside([tool, "-p", str(beside.triton_pid), "-i", "-m", "-s"], 30.0)
    threads = parse_eu_stack(out)
    if not threads:  # exit code 1 only means some frames could not be unwound
        return [], f"(eu-stack could not read Triton's threads: {(err or out).strip()[:300]})"
    return [t for t in threads if any(_in_model(f, model, backend) for f in t.frames)], ""


def native_stack(beside: Beside, model: str, backend: str) -> str:
    """Where Triton's threads are inside ``model``'s C++ backend, as text ("" if none is)."""
    threads, problem = busy_threads(beside, model, backend)
    return problem or describe_threads(threads, model, backend)
