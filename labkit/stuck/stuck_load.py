"""A load that does not finish within its time limit: where the model's code is, and ending the load
so that the server stays usable (other models serve; the fixed model loads in the same server).

Triton's load call returns only when every instance is initialized. A Python ``initialize`` (or
model.py's import) that never returns is ended like a stuck request (labkit_stub: SIGUSR2 raises
Unstuck inside model.py): Triton sees ``initialize`` raise and fails the load cleanly. A stub that
does not leave (stuck below Python, or before importing triton_python_backend_utils) is killed:
during a load that is safe, Triton fails the load ("stub ... is not healthy"), unlike during a
request (see unstick). A C++ ``ModelInitialize`` runs on a Triton thread that cannot be ended from
outside: the model stays LOADING while every other model serves, until the server restarts.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from ..errors import LoadTimeoutError
from ..stub_side import RECORDS_DIR
from .debuggers import PY_SPY, missing_text
from .native_stack import busy_threads, describe_threads, innermost_line
from .python_stack import Stub, busy_stubs, describe_frames
from .report import backend_of, is_python
from .stuck_server import StuckServer
from .unstick import UNSTICK_SIGNAL

#: py-spy's names of the model.py frames a load runs: ``TritonPythonModel.initialize``, the module,
#: ``auto_complete_config`` (when the server runs with auto_complete).
_LOAD_FRAMES = ("initialize", "<module>", "auto_complete_config")
_LEAVE_S = 2.0  # how long a stub gets to leave model.py after being asked, before it is killed
_ANSWER_S = 10.0  # how long Triton gets to fail the load once its stub is gone

#: ``answered(seconds)``: waits up to ``seconds`` for Triton's answer to the load call; whether it came.
Answered = Callable[[float], bool]


def loading_stubs(server: StuckServer, model: str) -> list[tuple[Stub, list[dict]]] | None:
    """The stubs of ``model`` inside its loading code (not those of a version still serving), with
    their model.py frames; None without py-spy."""
    busy = busy_stubs(server.runtime, model)
    if busy is None:
        return None
    return [
        (stub, frames) for stub, frames in busy if any(f["name"].rsplit(".", 1)[-1] in _LOAD_FRAMES for f in frames)
    ]


def _end_python(server: StuckServer, model: str, why: str, answered: Answered) -> tuple[str, str, bool]:
    """End the stubs stuck loading ``model``: (their stack, the innermost line, whether the load ended)."""
    loading = loading_stubs(server, model)
    if loading is None:
        return missing_text(server.runtime, PY_SPY), "", False
    if not loading:
        return "", "", False
    stack = "\n".join(
        f"  stub of instance {stub.instance} (pid {stub.pid}), innermost last:\n{describe_frames(frames)}"
        for stub, frames in loading
    )
    location = f"model.py:{loading[0][1][0]['line']}"
    for stub, _ in loading:
        (server.workspace.backend_dir / "python" / RECORDS_DIR / f"{stub.instance}.unstick").write_text(why)
        server.runtime.signal_beside(stub.pid, UNSTICK_SIGNAL)
    if not answered(_LEAVE_S):
        for stub, _ in loading:
            server.runtime.signal_beside(stub.pid, signal.SIGKILL)
            (server.workspace.backend_dir / "python" / RECORDS_DIR / f"{stub.instance}.unstick").unlink(missing_ok=True)
    return stack, location, answered(_ANSWER_S)


def _native(server: StuckServer, model: str, backend: str) -> tuple[str, str]:
    threads, problem = busy_threads(server.runtime, model, backend)
    if problem:
        return problem, ""
    return (describe_threads(threads, model, backend), innermost_line(threads, model, backend)) if threads else ("", "")


def load_timeout(
    server: StuckServer,
    model: str,
    limit_s: float,
    answered: Answered,
    reason: Callable[[], str],
    interrupted_after: float | None = None,
) -> LoadTimeoutError:
    """The error for loading ``model`` past ``limit_s`` seconds (or interrupted by the person after
    ``interrupted_after`` seconds), after ending the load where it can be ended. ``reason()``:
    Triton's words for the failed load, once it answered."""
    backend = backend_of(server, model)
    python = bool(backend) and is_python(server, backend)
    if interrupted_after is None:
        why = f"labkit ended this load after load_timeout_s={limit_s:g} s"
    else:
        why = f"labkit ended this load: it was interrupted after {interrupted_after:.1f} s"
    if python:
        stack, location, ended = _end_python(server, model, why, answered)
    elif backend and server.alive:
        (stack, location), ended = _native(server, model, backend), False
    else:
        stack, location, ended = "", "", False
    still = ", ".join(m for m in server.loaded_models() if m != model) or "none"
    if ended:
        then = f"the server keeps serving (other models: {still}). Fix the model and load it again."
    elif python:
        then = (
            f"labkit could not end it: Triton is still loading {model!r}; other models keep serving "
            f"({still}). Fix the model and call lab.restart() (same repository, same models loaded)."
        )
    else:
        then = (
            f"A thread inside Triton cannot be ended from outside: {model!r} stays LOADING while other models "
            f"keep serving ({still}). Fix the backend and call lab.restart() (same repository, same models "
            f"loaded)."
        )
    return LoadTimeoutError(
        model=model,
        timeout_s=limit_s,
        stack=stack,
        location=location,
        ended=ended,
        interrupted=interrupted_after is not None,
        waited_s=interrupted_after or 0.0,
        reason=reason() if ended else "",
        remedy=f"{then} If it is only slow, raise the limit: timeout_s= on load(), or lab.config = lab.config.with_(load_timeout_s=...)",
    )
