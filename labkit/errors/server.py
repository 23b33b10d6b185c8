"""Triton itself: it did not start, a port is taken, it stopped, or it never reached a state."""

from __future__ import annotations

from .root import LabkitError


class ServerError(LabkitError):
    """The Triton server could not start, or stopped working. ``log_tail``: its last log lines;
    ``exit_summary``: how Triton ended ("exit code 137", "killed by signal 9"), when it did and that is known."""

    def __init__(self, message: str, log_tail: str = "", *, exit_summary: str = "") -> None:
        self.log_tail = log_tail
        self.exit_summary = exit_summary
        if log_tail:
            message = f"{message}\n--- last server log lines ---\n{log_tail}"
        super().__init__(message)


class ServerStartError(ServerError):
    """Triton exited or did not become ready during start-up."""


class ContainerStartError(ServerStartError):
    """Docker could not create or start Triton's container; ``status_code``: the engine's HTTP status (0 if none)."""

    def __init__(self, message: str, log_tail: str = "", *, status_code: int = 0) -> None:
        self.status_code = status_code
        super().__init__(message, log_tail)


class PortTakenError(ServerStartError):
    """A server was asked to listen on ``port`` (its ``service``: Triton's "http", "grpc" or "metrics", or
    "room": the hub of `labkit room up`) on ``host``, and another process holds it; nothing was started,
    and no other port was tried."""

    def __init__(self, *, port: int, service: str, host: str = "127.0.0.1") -> None:
        self.port = port
        self.service = service
        self.host = host
        if service == "room":
            super().__init__(
                f"Port {port} on {host} is taken by another process (another room's hub?). Stop it "
                "(`labkit room down --dir DIR`), or choose another port: `labkit room up --port N`."
            )
            return
        super().__init__(
            f"Port {port} ({service}) on {host} is taken by another process (another tritonserver or labkit "
            f"serve?). Stop that process, choose another port (--{service}-port, or {service}_port= in "
            f"labkit.start()), or let labkit pick free ports (--any-ports, or {service}_port=0)."
        )


class BackendClashError(ServerStartError):
    """The backend folder ``directory`` holds a backend named ``backend``, and labkit's own backend folder
    already has one of that name (``python``: labkit's Python backend; or a backend written from a
    notebook); nothing was started."""

    def __init__(self, *, backend: str, directory: str) -> None:
        self.backend = backend
        self.directory = directory
        what = "labkit's own Python backend" if backend == "python" else "a backend labkit already serves"
        super().__init__(
            f"{directory}/{backend} has the name of {what}, and Triton takes one backend per name. Serve a "
            f"folder without {backend}/ (Triton's python backend comes with labkit), or rename your backend."
        )


class ServerNotRunningError(ServerError):
    """An operation needs a running server, and there is none (stopped, or died). ``crash``: where a
    C++ backend crashed it (signal or exception, and the cell's source lines), when one did; else empty.
    ``doing``: what failed because of it; ``stopped``: the server was stopped, not crashed."""

    def __init__(
        self,
        message: str,
        log_tail: str = "",
        *,
        crash: str = "",
        exit_summary: str = "",
        doing: str = "",
        stopped: bool = False,
    ) -> None:
        self.crash = crash
        self.doing = doing  # what failed because the server is gone, e.g. "The request to 'm' failed"
        self.stopped = stopped  # the server was stopped on purpose (not a crash)
        super().__init__(message, log_tail, exit_summary=exit_summary)


class WaitTimeoutError(ServerError):
    """The server did not reach a state labkit waited for (``what``) within ``timeout_s``."""

    def __init__(self, *, what: str, timeout_s: float, log_tail: str = "") -> None:
        self.what, self.timeout_s = what, timeout_s
        super().__init__(
            f"Waited {timeout_s:g} s for {what}; it did not happen. Read server.logs.tail(), or wait longer.", log_tail
        )
