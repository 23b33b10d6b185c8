"""Runs inside Triton's Python stub process (labkit's triton_python_backend_utils imports it there;
never imported by labkit itself). Standalone on purpose: the stub may run another Python (a container's, 3.8+).

* Where the stub ended itself: ``os._exit(n)`` writes the model.py frames that called it to
  ``labkit-stubs/<instance>.where.json`` first, and faulthandler prints the Python stack of a crash
  (SIGSEGV, SIGABRT, ...) into the log; the launcher beside it records the exit code or signal.
* ``lab.unstick()``: SIGUSR2 raises Unstuck in the stub's main thread when it is inside model.py, so
  a stuck ``execute`` ends (its requests fail) while the stub stays healthy; a load past its time
  limit ends a stuck ``initialize`` the same way (Triton then fails the load).
* Breakpoints: ``breakpoint()`` and ``pdb.set_trace()`` in model.py stop the request and wait for
  labkit to attach a pdb session through a unix socket in ``labkit-debug/`` (nothing listens
  otherwise). Only a request sent by an interactive labkit call (its request id starts with
  ``labkit-debug-``), or any request while ``labkit serve`` watches (``labkit-debug/attach-any``),
  waits; others, and a wait nobody answers within ``LABKIT_BREAKPOINT_WAIT_S`` (default 10 s),
  skip the breakpoint with a log line.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only: the stub imports socket when a session opens
    import socket

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "labkit-stubs")  # HERE is the Python backend's folder
DEBUG = os.path.join(HERE, "labkit-debug")
ATTACH_ANY = os.path.join(DEBUG, "attach-any")
REQUEST_MARK = "labkit-debug-"
INSTANCE = os.environ.get("LABKIT_STUB_INSTANCE", "")
_MAX_SOCKET_PATH = 107  # sockaddr_un.sun_path holds 108 bytes with the final NUL

_stub_pid = os.getpid()
_real_exit = os._exit
_sessions = 0


def _user_frames(frame) -> list:
    """The model.py frames from ``frame`` outwards, innermost first."""
    frames = []
    while frame is not None:
        code = frame.f_code
        if os.path.basename(code.co_filename) == "model.py":
            frames.append({"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name})
        frame = frame.f_back
    return frames


def _write_json(path: str, data: dict) -> None:
    import json  # imported when needed: every stub start pays for what this module imports

    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w") as handle:
        json.dump(data, handle)
    os.replace(partial, path)


def _log(text: str) -> None:
    sys.stderr.write(f"labkit: {text}\n")
    sys.stderr.flush()


def _exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):  # what model.py printed last is the best clue
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    if os.getpid() == _stub_pid and INSTANCE:  # not a forked child of model.py
        try:
            _write_json(
                os.path.join(RECORDS, f"{INSTANCE}.where.json"),
                {"how": f"os._exit({code})", "pid": os.getpid(), "frames": _user_frames(sys._getframe(1))},
            )
        except OSError:
            pass  # the exit matters more than its record
    _real_exit(code)


# -- unstick ----------------------------------------------------------------------------------------------

UNSTICK_SIGNAL = signal.SIGUSR2


class Unstuck(BaseException):
    """Raised into a stuck model.py by lab.unstick(); a BaseException, so ``except Exception`` in the
    model does not swallow it (Triton fails the requests with this message)."""


def _unstick(signum, frame) -> None:
    # Only when labkit asked just now (it writes <instance>.unstick first): a signal that reaches an
    # idle stub runs this at its next request, which must not fail for it.
    # The flag may say why (a load past its time limit); empty, it is lab.unstick() ending a request.
    flag = os.path.join(RECORDS, f"{INSTANCE}.unstick")
    try:
        asked = time.time() - os.stat(flag).st_mtime < 5.0
        with open(flag) as handle:
            why = handle.read().strip()
        os.unlink(flag)
    except OSError:
        return
    frames = _user_frames(frame)
    if asked and frames:
        where = f"model.py:{frames[0]['line']} in {frames[0]['function']}"
        if why:
            raise Unstuck(f"{why} (stuck at {where})")
        raise Unstuck(f"lab.unstick() ended this request, stuck at {where}; the model reloads with the code on disk")


# -- breakpoints -------------------------------------------------------------------------------------------


class DebuggerQuit(Exception):
    """The person quit the pdb session; the request that hit the breakpoint fails with this."""


def _request_ids(frame) -> list:
    """Ids of the InferenceRequest objects the stack holds (execute's ``requests``)."""
    ids = []
    while frame is not None:
        for value in list(frame.f_locals.values()):
            for item in (value if isinstance(value, (list, tuple)) else [value])[:256]:
                if type(item).__name__ == "InferenceRequest" and callable(getattr(item, "request_id", None)):
                    try:
                        ids.append(str(item.request_id()))
                    except Exception:  # noqa: BLE001 - a request that cannot say its id is not ours
                        pass
        frame = frame.f_back
    return sorted(set(ids))


class _SocketIO:
    """pdb's stdin and stdout on a socket. A person who went away reads as end of input (pdb's
    EOF command, which continues) and writes nowhere, never as an error in the model's code."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._file = conn.makefile("rwb")
        self.closed = False

    def readline(self) -> str:
        try:
            return self._file.readline().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def write(self, text: str) -> int:
        try:
            self._file.write(text.encode("utf-8", "replace"))
        except (OSError, ValueError):
            pass
        return len(text)

    def flush(self) -> None:
        try:
            self._file.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        self.flush()
        self.closed = True
        for part in (self._file, self._conn):
            try:
                part.close()
            except OSError:
                pass


def _remote_pdb(conn: socket.socket, where: str):
    """A pdb.Pdb on the socket: continuing without breakpoints ends the session, quitting fails the
    request. Built on first use: importing pdb costs every stub start 15 ms."""
    import bdb
    import pdb

    class RemotePdb(pdb.Pdb):
        def __init__(self) -> None:
            self._io = _SocketIO(conn)
            super().__init__(stdin=self._io, stdout=self._io, nosigint=True, readrc=False)

        def set_continue(self) -> None:
            super().set_continue()
            if not self.breaks:
                self._io.close()

        def set_quit(self) -> None:
            super().set_quit()
            self._io.close()

        def dispatch_return(self, frame, arg):
            result = super().dispatch_return(frame, arg)
            if frame is self.botframe:  # stepped out of the last Python frame: nothing more to debug
                self._io.close()
            return result

        def do_EOF(self, arg: str) -> int:
            # The person's side went away: let the request finish rather than fail it.
            self.clear_all_breaks()
            self.set_continue()
            return 1

        def trace_dispatch(self, frame, event, arg):
            try:
                return super().trace_dispatch(frame, event, arg)
            except bdb.BdbQuit:
                raise DebuggerQuit(
                    f"the debugger session at {where} was quit (q): this request fails; the model keeps serving"
                ) from None

    return RemotePdb()


def _listen(name: str):
    import socket

    os.makedirs(DEBUG, exist_ok=True)
    path = os.path.join(DEBUG, f"{name}.sock")
    if len(path.encode()) > _MAX_SOCKET_PATH:
        return None, path
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    return server, path


def set_trace(*_args, header=None, **_kwargs) -> None:
    """What ``breakpoint()`` and ``pdb.set_trace()`` call in the stub."""

    global _sessions
    frame = sys._getframe(1)
    where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
    ids = _request_ids(frame)
    interactive = [i for i in ids if i.startswith(REQUEST_MARK)]
    if not interactive and not os.path.exists(ATTACH_ANY):
        _log(
            f"breakpoint at {where} ({INSTANCE}) skipped: the request did not come from an interactive "
            f"labkit call (a load run, or another client); nothing waits for it."
        )
        return
    _sessions += 1
    name = f"{INSTANCE or 'stub'}-{os.getpid()}-{_sessions}"
    server, path = _listen(name)
    if server is None:
        _log(
            f"breakpoint at {where} ({INSTANCE}) skipped: the socket path {path} is too long; "
            f"use a shorter work folder."
        )
        return
    info = os.path.join(DEBUG, f"{name}.json")
    wait_s = float(os.environ.get("LABKIT_BREAKPOINT_WAIT_S", "10"))
    conn = None
    try:
        _write_json(
            info,
            {
                "instance": INSTANCE,
                "where": where,
                "request_ids": ids,
                "pid": os.getpid(),
                "socket": os.path.basename(path),
                "header": header or "",
            },
        )
        server.settimeout(wait_s)
        try:
            conn, _ = server.accept()
        except TimeoutError:
            _log(f"breakpoint at {where} ({INSTANCE}) skipped: no one attached within {wait_s:.0f} s.")
    finally:
        server.close()  # nothing listens any more, whatever happened
        for leftover in (path, info):
            try:
                os.unlink(leftover)
            except OSError:
                pass
    if conn is None:
        return
    conn.settimeout(None)
    _remote_pdb(conn, where).set_trace(frame)


class _PatchPdbOnImport:
    """A finder that lets model.py import pdb as usual, then points its set_trace at ours."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "pdb":
            return None
        sys.meta_path.remove(cls)
        spec = importlib.util.find_spec("pdb")
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module) -> None:
                run(module)
                module.set_trace = set_trace

            spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Set the hooks, in a stub labkit's launcher started (its forked children keep them but do not record)."""
    if not INSTANCE:
        return
    faulthandler.enable()  # a crash prints the Python stack (model.py line) into the log first
    os._exit = _exit
    try:
        signal.signal(UNSTICK_SIGNAL, _unstick)
    except ValueError:
        pass  # imported outside the stub's main thread: lab.unstick() then ends the stub instead
    sys.breakpointhook = set_trace
    if "pdb" in sys.modules:
        sys.modules["pdb"].set_trace = set_trace
    else:
        sys.meta_path.insert(0, _PatchPdbOnImport)
