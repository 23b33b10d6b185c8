"""One call to get unstuck: end the stubs of a Python model and reload it, so the next request is
served by fresh code from the model.py on disk, without restarting Triton or touching other models.

A reload alone is not enough: Triton loads the new instances at once but keeps the old ones until
their requests finish, which a stuck request never does. Ending the old stubs makes Triton fail those
requests ("not healthy") and finish the old instances. A C++ backend runs in Triton's own threads,
which cannot be ended from outside: then labkit says so and offers ``lab.restart()``.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from ..errors import InferenceError, ModelLoadError
from .native_stack import busy_threads, describe_threads
from .python_stack import stub_processes
from .report import backend_of, is_python


def unstick(server: Any, model: str, timeout_s: float = 30.0) -> str:
    """Reload ``model`` and end the stub processes that served it before; returns what was done."""
    backend = backend_of(server, model)
    if not backend:
        raise ModelLoadError(f"Model {model!r} has no config in {server.repository.root}; nothing to unstick.",
                             model=model, reason="no config")
    if not is_python(server, backend):
        threads, problem = busy_threads(server, model, backend)
        if threads:
            raise InferenceError(
                f"Model {model!r} is a C++ backend ({backend}) and a Triton thread is still running its code:\n"
                f"{describe_threads(threads, model, backend)}\nA thread inside Triton cannot be ended from outside; fix the backend and call "
                f"lab.restart() (same repository, same models loaded).", model=model)
        _reload(server, model)
        if problem:
            return f"{model!r}: reloaded. {problem} If a request to it still hangs, call lab.restart()."
        return f"{model!r}: no thread was in its C++ code; reloaded."
    old = stub_processes(server, model)
    _reload(server, model)  # new instances first, so the model serves again as soon as possible
    for stub in old:
        server.signal_beside(stub.pid, signal.SIGKILL)
    _wait_gone(server, model, {s.pid for s in old}, timeout_s)
    ended = ", ".join(f"{s.instance} (pid {s.pid})" for s in old) or "none was running"
    return f"{model!r}: ended the old stubs: {ended}; reloaded from {server.repository.model_dir(model)}."


def _reload(server: Any, model: str) -> None:
    server.repository.mark_changed(model)
    server.load(model)


def _wait_gone(server: Any, model: str, pids: set[int], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while pids & {s.pid for s in stub_processes(server, model)}:
        if time.monotonic() > deadline:
            raise InferenceError(f"The old stubs of {model!r} did not end within {timeout_s:.0f} s; "
                                 f"call lab.restart().", model=model)
        time.sleep(0.05)
