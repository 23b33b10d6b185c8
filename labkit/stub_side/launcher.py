#!/usr/bin/env -S python3 -I -S
"""labkit's stand-in for Triton's Python stub (installed as backends/python/triton_python_backend_stub).

Triton starts it as it would the stub; it runs the real stub (``stub/triton_python_backend_stub``)
as its child, relays its output to the log, and, when the stub
ends other than cleanly, writes ``labkit-stubs/<instance>.json``: exit code or signal, its last
lines, and where in model.py it called ``os._exit``. Triton reaps the stub itself and keeps only
"not healthy"; this is how labkit learns more. Triton's SIGKILL of this process reaches the stub
too (parent-death signal). Standalone: it runs with whatever python3 the server has, and imports
little (no subprocess, json only at a record): it delays every stub start.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REAL_STUB = os.path.join(HERE, "stub", "triton_python_backend_stub")
RECORDS = os.path.join(HERE, "labkit-stubs")
_PR_SET_PDEATHSIG = 1
_TAIL_BYTES = 16384
_TAIL_LINES = 20


def _start(argv: list[str], env: dict[str, str]) -> tuple[int, int]:
    """Fork and exec the real stub with its output into a pipe; its pid and the pipe's read end."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: die with this process, then become the stub
        try:
            os.dup2(write, 1)
            os.dup2(write, 2)
            os.close(read)
            os.close(write)
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            os.execve(REAL_STUB, [REAL_STUB, *argv], env)
        finally:
            os._exit(127)
    os.close(write)
    return pid, read


def _relay(pid: int, fd: int) -> tuple[int, bytes]:
    """Copy the stub's output to ours until it exits (not until every child of it closes the pipe);
    its wait status and last bytes."""
    tail = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.5)
        chunk = os.read(fd, 65536) if ready else b""
        if chunk:
            os.write(1, chunk)
            tail = (tail + chunk)[-_TAIL_BYTES:]
            continue
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, tail
        if ready:  # end of output but not yet reaped: wait for it
            return os.waitpid(pid, 0)[1], tail


def _record(instance: str, pid: int, code: int, started: float, tail: bytes) -> None:
    import json  # only here: most stubs end cleanly

    where_file = os.path.join(RECORDS, f"{instance}.where.json")
    where = None
    try:
        with open(where_file) as handle:
            where = json.load(handle)
        os.unlink(where_file)
    except (OSError, ValueError):
        pass
    if where is not None and where.get("pid") != pid:
        where = None  # another stub of this instance wrote it
    record = {
        "instance": instance,
        "pid": pid,
        "started": started,
        "ended": time.time(),
        "exit_code": code if code >= 0 else None,
        "signal": -code if code < 0 else None,
        "last_lines": tail.decode(errors="replace").splitlines()[-_TAIL_LINES:],
        "where": where,
    }
    os.makedirs(RECORDS, exist_ok=True)
    partial = os.path.join(RECORDS, f".{instance}.json.partial")
    with open(partial, "w") as handle:
        json.dump(record, handle)
    os.replace(partial, os.path.join(RECORDS, f"{instance}.json"))


def main() -> int:
    if len(sys.argv) < 10:  # not an instance's stub (Triton also runs it bare once): just be it
        os.execv(REAL_STUB, [REAL_STUB, *sys.argv[1:]])
    instance = sys.argv[8]
    started = time.time()
    pid, fd = _start(sys.argv[1:], dict(os.environ, LABKIT_STUB_INSTANCE=instance))
    # The server's whole process group gets SIGTERM at shutdown: the stub decides, this waits for it.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    status, tail = _relay(pid, fd)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)  # negative: a signal
    if code != 0:
        try:
            _record(instance, pid, code, started, tail)
        except OSError:
            pass  # the record is a courtesy; the exit status below is what Triton needs
    if code < 0:  # end the same way, so Triton sees what the stub did
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code if code >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
