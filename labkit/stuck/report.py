"""Words for a request that got no answer: where the model is stuck, and what to do next."""

from __future__ import annotations

from ..errors import LabkitError, RequestInterruptedError, RequestTimeoutError
from .debuggers import Tool, available
from .native_stack import native_stack
from .python_stack import python_stack
from .stuck_server import StuckServer


def is_python(server: StuckServer, backend: str) -> bool:
    """Whether ``backend`` runs model.py in a stub: the Python backend or a Python-based backend."""
    return backend == "python" or (server.workspace.backend_dir / backend / "model.py").exists()


def backend_of(server: StuckServer, model: str) -> str:
    try:
        return server.repository.read_config(model).backend
    except LabkitError:
        return ""  # a model labkit has no config for: nothing to say about its code


def debug_tools(server: StuckServer | None = None) -> list[Tool]:
    """Whether py-spy and eu-stack are available where ``server`` runs Triton (default: this machine)."""
    return available(server.runtime if server is not None else None)


def where_stuck(server: StuckServer, model: str) -> str:
    """The live frames of ``model``'s code: model.py lines of its busy stubs, or the C++ cell lines
    of Triton's threads in its backend ("" when its code is running nowhere)."""
    backend = backend_of(server, model)
    if not backend or not server.alive:
        return ""
    return (
        python_stack(server.runtime, model)
        if is_python(server, backend)
        else native_stack(server.runtime, model, backend)
    )


def _restart_needed(server: StuckServer, model: str) -> bool:
    """Only a restart ends a request stuck in ``model``: a thread inside Triton (a C++ backend)."""
    backend = backend_of(server, model)
    return bool(backend) and not is_python(server, backend)


def _next_steps(server: StuckServer, model: str) -> str:
    if _restart_needed(server, model):
        return (
            f"A thread inside Triton cannot be ended from outside: fix the backend, rebuild it, and call "
            f"lab.restart() (same repository, same models loaded); lab.unstick({model!r}) says the same."
        )
    return (
        f"The stuck request keeps its instance busy: fix the code, then lab.unstick({model!r}) ends the "
        f"stuck request and reloads the model (other models keep serving)."
    )


def timeout_error(
    server: StuckServer, model: str, limit_s: float, *, stack: str | None = None, extra: str = ""
) -> RequestTimeoutError:
    """The error for a request to ``model`` unanswered after ``limit_s`` seconds (stack read now
    unless given)."""
    stack = where_stuck(server, model) if stack is None else stack
    return RequestTimeoutError(
        model=model,
        limit_s=limit_s,
        stack=stack,
        restart_needed=_restart_needed(server, model),
        reason=extra,
        remedy=f"{_next_steps(server, model)} If it is only slow, raise the limit: timeout_s= on the call, or lab.config = lab.config.with_(request_timeout_s=...)",
    )


def interrupted_error(server: StuckServer, model: str, limit_s: float, waited_s: float) -> RequestInterruptedError:
    """The error for a wait on ``model`` ended by a kernel interrupt after ``waited_s`` seconds."""
    stack = where_stuck(server, model)
    return RequestInterruptedError(
        model=model,
        limit_s=limit_s,
        waited_s=waited_s,
        stack=stack,
        restart_needed=_restart_needed(server, model),
        remedy=_next_steps(server, model),
    )
