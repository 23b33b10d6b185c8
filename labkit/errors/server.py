"""Triton itself: it did not start, a port is taken, it stopped, or it never reached a state."""

from __future__ import annotations

from .root import LabkitError, block, said, sentence


class ServerError(LabkitError):
    """The Triton server (or the room's hub) could not start, or stopped working. ``doing``: what failed
    ("Cannot reload 'm'", "Triton (embedded) did not start"); ``reason``: why, in a few words ("Triton
    refused", "exited during start-up"); ``detail``: Triton's own words; ``log_tail``: its last log lines;
    ``exit_summary``: how Triton ended ("exit code 137", "killed by signal 9"), when it did and that is known."""

    def __init__(
        self,
        *,
        doing: str = "",
        reason: str = "",
        detail: str = "",
        log_tail: str = "",
        exit_summary: str = "",
        remedy: str = "",
    ) -> None:
        self.doing = doing
        self.reason = reason
        self.detail = detail
        self.log_tail = log_tail
        self.exit_summary = exit_summary
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        text = ": ".join(part for part in (self.doing, self.reason) if part) or "The server failed"
        text = text if self.doing else sentence(text)
        if self.exit_summary and self.exit_summary not in text:
            text += f" ({self.exit_summary})"
        return said(text, self.detail)

    def _blocks(self) -> list[tuple[str, str]]:
        return [("what it said", block(self.detail)), ("last server log lines", self.log_tail)]


class ServerStartError(ServerError):
    """Triton (or the room's hub) exited or did not become ready during start-up."""


class ContainerStartError(ServerStartError):
    """Docker could not create or start Triton's container (``image``); ``status_code``: the engine's HTTP
    status (0 if none); ``detail``: the engine's words."""

    def __init__(
        self,
        *,
        doing: str,
        detail: str = "",
        image: str = "",
        log_tail: str = "",
        status_code: int = 0,
        remedy: str = "",
    ) -> None:
        self.status_code = status_code
        self.image = image
        super().__init__(doing=doing, detail=detail, log_tail=log_tail, remedy=remedy)

    def _headline(self) -> str:
        text = f"Docker could not {self.doing}" + (f" from {self.image}" if self.image else "")
        if self.status_code:
            text += f" (HTTP {self.status_code})"
        return f"{text}: {self.detail}" if self.detail else text


class PortTakenError(ServerStartError):
    """A server was asked to listen on ``port`` (its ``service``: Triton's "http", "grpc" or "metrics", or
    "room": the hub of `labkit room up`) on ``host``, and another process holds it; nothing was started,
    and no other port was tried."""

    def __init__(self, *, port: int, service: str, host: str = "127.0.0.1") -> None:
        self.port = port
        self.service = service
        self.host = host
        if service == "room":
            remedy = "Stop it (`labkit room down --dir DIR`), or choose another port: `labkit room up --port N`"
        else:
            remedy = (
                f"Stop that process, choose another port (--{service}-port, or {service}_port= in labkit.start()), "
                f"or let labkit pick free ports (--any-ports, or {service}_port=0)"
            )
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        if self.service == "room":
            return f"Port {self.port} on {self.host} is taken by another process (another room's hub?)"
        return (
            f"Port {self.port} ({self.service}) on {self.host} is taken by another process (another tritonserver "
            "or labkit serve?)"
        )


class BackendClashError(ServerStartError):
    """The backend folder ``directory`` holds a backend named ``backend``, and labkit's own backend folder
    already has one of that name (``python``: labkit's Python backend; or a backend written from a
    notebook); nothing was started."""

    def __init__(self, *, backend: str, directory: str) -> None:
        self.backend = backend
        self.directory = directory
        super().__init__(
            remedy=f"Serve a folder without {backend}/ (Triton's python backend comes with labkit), or rename your backend"
        )

    def _headline(self) -> str:
        what = "labkit's own Python backend" if self.backend == "python" else "a backend labkit already serves"
        return f"{self.directory}/{self.backend} has the name of {what}, and Triton takes one backend per name"


class ServerNotRunningError(ServerError):
    """An operation needs a running server, and there is none (stopped, or died). ``crash``: where a
    C++ backend crashed it (signal or exception, and the cell's source lines), when one did; else empty.
    ``doing``: what failed because of it; ``stopped``: the server was stopped, not crashed; ``reason``:
    why there is none, when more is known ("the Triton server has exited")."""

    def __init__(
        self,
        *,
        doing: str = "",
        reason: str = "",
        log_tail: str = "",
        crash: str = "",
        exit_summary: str = "",
        stopped: bool = False,
        remedy: str = "",
    ) -> None:
        self.crash = crash
        self.stopped = stopped  # the server was stopped on purpose (not a crash)
        if not reason:
            reason = "this server was stopped" if stopped else "no server is running"
        if not remedy and stopped:
            remedy = "start a new one"
        super().__init__(doing=doing, reason=reason, log_tail=log_tail, exit_summary=exit_summary, remedy=remedy)

    def _headline(self) -> str:
        text = super()._headline()
        return text + " (it was stopped, not crashed)" if self.stopped and "stopped" not in text else text

    def _blocks(self) -> list[tuple[str, str]]:
        return [("where it crashed", self.crash), *super()._blocks()]


class WaitTimeoutError(ServerError):
    """The server did not reach a state labkit waited for (``what``) within ``timeout_s``."""

    def __init__(self, *, what: str, timeout_s: float, log_tail: str = "") -> None:
        self.what, self.timeout_s = what, timeout_s
        super().__init__(log_tail=log_tail, remedy="Read server.logs.tail(), or wait longer")

    def _headline(self) -> str:
        return f"Waited {self.timeout_s:g} s for {self.what}; it did not happen"
