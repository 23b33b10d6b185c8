"""Where a failed build's messages point: the CMake file and line of a configure error, the file and line
of the compiler's first error (in the person's own files where the compiler shows a way there), the
command Ninja ran for it, and the warning a ``-Werror`` turned into that error.

Written here, not taken from a library: no package parses GCC's and CMake's message formats, and
these four regular expressions are all it takes (messages are read with LC_ALL=C, so quotes are ASCII).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: "CMake Error at CMakeLists.txt:12 (message):" or "CMake Error in CMakeLists.txt:" (generate time).
_CMAKE_ERROR = re.compile(r"^CMake Error (?:at|in) (.+?)(?::(\d+))?(?: \(([\w-]+)\))?:\s*$")
#: One frame of the call stack CMake prints under an error: "  /path/CMakeLists.txt:76 (find_package)".
_CMAKE_FRAME = re.compile(r"^\s+(\S.*?):(\d+) \(([\w-]+)\)\s*$")
#: "src/x.cc:12:3: error: ..." (GCC and Clang), "x.cc:12: undefined reference ..." (the linker).
_ERROR = re.compile(r"^(?:\S*ld: )?(\S+?):(\d+):(?:\d+:)? (?:fatal error|error|undefined reference)\b(.*)$")
#: Any "file:line" in the lines above an error ("inlined from 'f' at src/x.cc:4:9", "from src/x.cc:1:").
_PLACE = re.compile(r"(/[^\s:',]+|[\w.+-][^\s:',]*\.\w+):(\d+)")
_WERROR = re.compile(r"\[-Werror=([\w+=-]+)\]")


@dataclass(frozen=True)
class Place:
    """Where messages point: ``file`` (relative to the project when inside it) and ``line``; ``flag`` the
    warning behind a -Werror error, ``command`` the command Ninja printed for the failed step."""

    file: str = ""
    line: int | None = None
    flag: str = ""
    command: str = ""


def _shown(path: str, project: Path) -> str:
    try:
        return Path(path).resolve().relative_to(project).as_posix()
    except ValueError:
        return path


def _inside(path: str, project: Path) -> bool:
    return not Path(path).is_absolute() or Path(path).resolve().is_relative_to(project)


def cmake_error(output: str, project: Path, cmake_modules: Path) -> Place:
    """The first CMake error's place: the innermost frame outside CMake's own modules (a find_package
    that fails inside FindPackageHandleStandardArgs.cmake is shown at the project's find_package)."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        found = _CMAKE_ERROR.match(line)
        if not found:
            continue
        frames = [(found.group(1), found.group(2))]
        stack = lines[index + 1 :]
        if "Call Stack (most recent call first):" in stack[:40]:
            for frame_line in stack[stack.index("Call Stack (most recent call first):") + 1 :]:
                frame = _CMAKE_FRAME.match(frame_line)
                if not frame:
                    break
                frames.append((frame.group(1), frame.group(2)))
        chosen = next((f for f in frames if not Path(f[0]).resolve().is_relative_to(cmake_modules)), frames[0])
        return Place(_shown(chosen[0], project), int(chosen[1]) if chosen[1] else None)
    return Place()


def compile_error(output: str, project: Path) -> Place:
    """The first compiler (or linker) error's place, its -Werror flag, and the command Ninja ran for it.
    An error inside a header of the compiler's (a std::unique_ptr's delete, say) is shown at the line of
    the project's own file the compiler names on the way there (the innermost inlined frame, else the
    include), when it names one."""
    lines = output.splitlines()
    command, since = "", 0
    for index, line in enumerate(lines):
        if line.startswith("FAILED: "):
            command = lines[index + 1].strip() if index + 1 < len(lines) else ""
            since = index + 2
            continue
        found = _ERROR.match(line)
        if not found:
            continue
        file, number = found.group(1), int(found.group(2))
        if not _inside(file, project):  # the innermost of the project's inlined frames, else its include line
            above = lines[since:index]
            inlined = [
                m
                for text in above
                if "inlined from" in text
                for m in _PLACE.finditer(text)
                if _inside(m.group(1), project)
            ]
            included = [m for text in above for m in _PLACE.finditer(text) if _inside(m.group(1), project)]
            if inlined or included:
                chosen = inlined[0] if inlined else included[-1]
                file, number = chosen.group(1), int(chosen.group(2))
        flag = _WERROR.search(found.group(3))
        return Place(_shown(file, project), number, f"-W{flag.group(1)}" if flag else "", command)
    return Place(command=command)
