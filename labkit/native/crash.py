"""A C++ backend's crash, read back from the server's log: which signal, which uncaught C++
exception if one ended it, and the frames inside backend libraries at the cell's source lines.

Every library built by labkit installs a handler (src/labkit_crash.cc) that writes the stack as
``labkit-frame:`` lines (library + offset), then ends the process with that signal; an
uncaught exception first makes the C++ runtime print "terminate called after throwing an instance
of 'T'" and its what(). labkit.native.symbols maps the frames to source lines, inlined functions
included (``poke`` at its line, then "(inlined by)" the function that called it, at the call).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .symbols import SourceLine, backend_of, locate

_CRASH = re.compile(r"^labkit-crash: signal (?P<number>\d+) (?P<name>\w+)", re.M)
_FRAME = re.compile(r"^labkit-frame: (?P<kind>pc|ret) (?P<library>.+)\+0x(?P<offset>[0-9a-f]+)$", re.M)
_THROWN = re.compile(
    r"terminate called after throwing an instance of '(?P<type>[^']+)'(?:\s*\n\s*what\(\):\s*(?P<what>[^\n]*))?"
)
_SHOWN = 8  # frames in a report: enough to see the path from the entry point to the fault


@dataclass(frozen=True)
class CrashFrame:
    """One stack frame as the crashed process saw it: a library path and the offset from its load
    address, not yet a source line (``Crash.lines`` maps them). A live thread's frame, already named by
    eu-stack, is labkit.stuck.native_stack.StackFrame."""

    library: str
    offset: int
    returns: bool  # a return address (every frame but the innermost)


@dataclass(frozen=True)
class Crash:
    signal: str  # e.g. "SIGSEGV"
    frames: list[CrashFrame]
    exception: str = ""  # "std::runtime_error: what()" when an uncaught exception ended the process
    lines: list[tuple[CrashFrame, list[SourceLine]]] = field(default_factory=list)  # backend frames, innermost first

    @property
    def where(self) -> SourceLine | None:
        """The innermost line of the backend author's own code."""
        return next((s for _, found in self.lines for s in found if s.user), None)

    def __str__(self) -> str:
        where = self.where
        at = f" at {where.file}:{where.line}" if where else ""
        if self.exception:
            head = f"An uncaught C++ exception ({self.exception}) escaped the backend{at}."
        elif self.signal == "SIGABRT":
            head = f"The backend aborted (SIGABRT){at}."
        else:
            head = f"The backend crashed with {self.signal}{at}."
        rows: list[str] = []
        in_helper = False
        for frame, found in self.lines:
            if not found:
                rows.append(f"  {frame.library.rsplit('/', 1)[-1]}+{frame.offset:#x} (no line information)")
                in_helper = False
            for k, s in enumerate(found):
                helper = s.file.startswith("labkit/")
                if helper and in_helper:
                    continue  # one line for a run of helper frames: they are not the person's code
                in_helper = helper
                shown = f"(labkit's helper layer: {s.file}:{s.line})" if helper else str(s)
                # as addr2line -i: the function that the one above was inlined into, at the call
                rows.append(f"    (inlined by) {shown}" if k > 0 and found[k - 1].inlined else f"  {shown}")
        return "\n".join([head, *rows[:_SHOWN]])


def read(log: str, host_path: Callable[[str], str] = str) -> Crash | None:
    """The last crash reported in ``log`` (the server's log since it started), with the frames that
    lie in backend libraries mapped to source lines; None if the log reports none. ``host_path``
    turns a library path as the server saw it into one on this machine (a container's mounts)."""
    starts = list(_CRASH.finditer(log))
    if not starts:
        return None
    start = starts[-1]
    block = log[start.end() :]
    frames = []
    for match in _FRAME.finditer(block):
        frames.append(CrashFrame(match["library"], int(match["offset"], 16), match["kind"] == "ret"))
    thrown = list(_THROWN.finditer(log[: start.start()]))
    exception = ""
    if thrown:
        exception = thrown[-1]["type"] + (f": {thrown[-1]['what'].strip()}" if thrown[-1]["what"] else "")
    located: dict[int, list[SourceLine]] = {}
    ours = [(i, f) for i, f in enumerate(frames) if backend_of(f.library) not in (None, "python")]
    for library in dict.fromkeys(f.library for _, f in ours):  # one addr2line run per library and kind
        for returns in (False, True):
            group = [(i, f) for i, f in ours if f.library == library and f.returns == returns]
            offsets = [f.offset for _, f in group]
            for (i, _), found in zip(group, locate(host_path(library), offsets, returns=returns)):
                located[i] = found
    lines = [(frames[i], located.get(i, [])) for i, _ in ours]
    return Crash(start["name"], frames, exception, lines)
