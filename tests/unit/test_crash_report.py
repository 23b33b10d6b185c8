"""How a C++ backend's crash reads (labkit.native.crash.Crash's text): the one place its sentences are checked.
The integration tests (tests/test_crash.py, tests/test_docker.py) check the crash's fields, read from a real
crashed Triton, and that the error carries this text."""

from __future__ import annotations

from labkit.native.crash import Crash, CrashFrame, read
from labkit.native.symbols import SourceLine

LIBRARY = "/models/backends/crashy/libtriton_crashy.so"


def _crash(signal: str, *lines: list[SourceLine], exception: str = "") -> Crash:
    frames = [CrashFrame(LIBRARY, 0x1000 + 16 * i, i > 0) for i in range(len(lines))]
    return Crash(signal, frames, exception, list(zip(frames, lines)))


POKE = SourceLine("poke(int)", "crashy.cc", 6, user=True, inlined=True)
CALL = SourceLine("operator()", "crashy.cc", 10, user=True)
HELPER = SourceLine("labkit::execute", "labkit/backend.hpp", 200, user=False)
ENTRY = SourceLine("TRITONBACKEND_ModelInstanceExecute", "crashy.cc", 9, user=True)


def test_a_signal_is_named_with_the_innermost_line_of_the_persons_code():
    text = str(_crash("SIGSEGV", [POKE, CALL], [HELPER], [ENTRY]))
    head, *rows = text.splitlines()
    assert head == "The backend crashed with SIGSEGV at crashy.cc:6."
    # as addr2line -i: poke, then the function it was inlined into, at the call
    assert rows[:2] == ["  crashy.cc:6 in poke", "    (inlined by) crashy.cc:10 in operator()"]
    assert rows[2] == "  (labkit's helper layer: labkit/backend.hpp:200)"
    assert rows[3] == "  crashy.cc:9 in TRITONBACKEND_ModelInstanceExecute"


def test_an_abort_and_an_uncaught_exception_say_so():
    assert str(_crash("SIGABRT", [ENTRY])).startswith("The backend aborted (SIGABRT) at crashy.cc:9.")
    thrown = _crash("SIGABRT", [ENTRY], exception="std::out_of_range: row 7 of 4")
    assert str(thrown).startswith(
        "An uncaught C++ exception (std::out_of_range: row 7 of 4) escaped the backend at crashy.cc:9."
    )


def test_a_crash_outside_the_persons_code_names_no_line_and_a_frame_without_lines_its_library():
    crash = Crash("SIGSEGV", [CrashFrame(LIBRARY, 0x2A, False)], "", [(CrashFrame(LIBRARY, 0x2A, False), [])])
    assert crash.where is None
    assert str(crash).splitlines() == [
        "The backend crashed with SIGSEGV.",
        "  libtriton_crashy.so+0x2a (no line information)",
    ]


def test_a_log_is_read_for_its_last_crash_and_the_exception_thrown_before_it():
    log = (
        "labkit-crash: signal 11 SIGSEGV\nlabkit-frame: pc /lib/libc.so.6+0x10\n"
        "terminate called after throwing an instance of 'std::out_of_range'\n  what():  row 7 of 4\n"
        "labkit-crash: signal 6 SIGABRT\nlabkit-frame: pc /lib/libc.so.6+0x20\nlabkit-frame: ret /lib/libc.so.6+0x30\n"
    )
    crash = read(log)
    assert crash is not None and crash.signal == "SIGABRT" and crash.exception == "std::out_of_range: row 7 of 4"
    assert [(f.offset, f.returns) for f in crash.frames] == [(0x20, False), (0x30, True)]
    assert crash.lines == []  # libc is no backend: no source lines looked up
    assert read("I1129 no crash here\n") is None
