"""One call to get unstuck: end what a Python model is stuck in, so that the server can reload it and the
next request is served by fresh code from the model.py on disk, without restarting Triton or touching
other models. This wing only ends and tells (``Freed``); the server's wing reloads (``Models.unstick``).

A reload alone is not enough: Triton loads new instances at once but keeps the old ones until their
requests finish, which a stuck request never does. Killing the stub is not safe either: Triton 2.41
then restarts it from the executing thread and, seen here every time, crashes the whole server
(SIGSEGV in libtriton_python.so). So labkit asks the stub (labkit_stub: SIGUSR2 raises ``Unstuck``
inside model.py): the stuck ``execute`` ends, its requests fail, and the stub stays healthy. A stub
stuck below Python (in a C extension), like a C++ backend's thread inside Triton, cannot be ended
safely: labkit says so, with where it is, and offers ``lab.restart()``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InferenceError, ModelLoadError, WaitTimeoutError
from ..plumbing.polling import wait_until
from ..stub_side import RECORDS_DIR
from .native_stack import busy_threads, describe_threads
from .python_stack import busy_stubs, python_stack, stub_processes
from .report import backend_of, is_python
from .stuck_server import StuckServer

UNSTICK_SIGNAL = signal.SIGUSR2  # labkit_stub.UNSTICK_SIGNAL, on the stub side
_ANSWER_S = 3.0  # how long a stub gets to leave model.py after being asked


@dataclass(frozen=True)
class Freed:
    """What ``free`` did to a stuck model, for the server that reloads it next: ``ended`` names the stubs
    it ended (a Python model); ``problem`` why it could not look inside a C++ backend's threads."""

    model: str
    python: bool
    ended: str = ""
    problem: str = ""

    def report(self, model_dir: Path) -> str:
        """What was done, once the server has reloaded the model from ``model_dir``."""
        if self.python:
            return f"{self.model!r}: ended the stuck request(s) in {self.ended}; reloaded from {model_dir}."
        if self.problem:
            return f"{self.model!r}: reloaded. {self.problem} If a request to it still hangs, call lab.restart()."
        return f"{self.model!r}: no thread was in its C++ code; reloaded."


def free(server: StuckServer, model: str) -> Freed:
    """End what ``model`` is stuck in, so that a reload serves it again (the caller reloads it).
    InferenceError where only a restart helps: a stub stuck below Python, a C++ thread in its code."""
    backend = backend_of(server, model)
    if not backend:
        # no config.pbtxt is MissingConfigError, as everywhere; an unreadable one its ConfigError
        server.repository.read_config(model)
        raise ModelLoadError(
            model=model,
            happened="names no backend in its config; nothing to unstick",
            reason="no backend",
            remedy="give its config a backend (or check the model's name)",
        )
    if not is_python(server, backend):
        return _free_cpp(server, model, backend)
    busy = busy_stubs(server.runtime, model)
    stuck = [stub for stub, _ in busy] if busy is not None else stub_processes(server.runtime, model)
    for stub in stuck:
        (server.workspace.backend_dir / "python" / RECORDS_DIR / f"{stub.instance}.unstick").touch()
        server.runtime.signal_beside(stub.pid, UNSTICK_SIGNAL)
    pids = {stub.pid for stub in stuck}
    if not _wait(lambda: not _still_busy(server, model, pids), _ANSWER_S):
        raise _cannot_end(
            model,
            "is stuck below Python, where labkit cannot interrupt it (e.g. inside a C "
            "extension), and ending its stub would crash Triton 23.12",
            python_stack(server.runtime, model),
        )
    ended = ", ".join(f"{s.instance} (pid {s.pid})" for s in stuck) or "none (nothing was stuck)"
    return Freed(model, python=True, ended=ended)


def _free_cpp(server: StuckServer, model: str, backend: str) -> Freed:
    threads, problem = busy_threads(server.runtime, model, backend)
    if threads:
        raise _cannot_end(
            model,
            f"is a C++ backend ({backend}) and a Triton thread is still running its code, "
            f"which cannot be ended from outside",
            describe_threads(threads, model, backend),
        )
    return Freed(model, python=False, problem=problem)


def _cannot_end(model: str, why: str, stack: str) -> InferenceError:
    return InferenceError(
        model=model,
        happened=f"cannot be ended: model {model!r} {why}",
        reason=why,
        stack=stack,
        remedy="Fix the code and call lab.restart() (same repository, same models loaded)",
    )


def _still_busy(server: StuckServer, model: str, pids: set[int]) -> set[int]:
    busy = busy_stubs(server.runtime, model)
    if busy is None:  # without py-spy, a stub that lives on may still be stuck: assume it left
        return set()
    return pids & {stub.pid for stub, _ in busy}


def _wait(done: Callable[[], bool], timeout_s: float) -> bool:
    try:
        return wait_until(done, timeout_s, "the stuck stubs to leave model.py", interval_s=0.1)
    except WaitTimeoutError:
        return False
