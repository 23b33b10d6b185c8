"""The control plane: labkit's own calls to Triton's HTTP API (repository, statistics, configs), on
one client per thread, with a dead server, Triton's refusal and a broken connection each turned into
a labkit error."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from tritonclient.utils import InferenceServerException

from ..errors import LabkitError, ServerError, ServerNotRunningError
from ..plumbing.endpoints import Endpoints
from ..plumbing.transport import HttpClient, Transport
from .connection import CONNECTION_ERRORS
from .health import Health


class ControlPlane:
    """Clients of one server. ``endpoints`` is set at every launch."""

    def __init__(self, health: Health) -> None:
        self.health = health
        self.endpoints = Endpoints()
        # tritonclient's HTTP client runs on gevent and cannot cross threads: one per thread.
        self._local = threading.local()
        self._clients: weakref.WeakSet[HttpClient] = weakref.WeakSet()  # a thread's own goes when the thread ends
        self._lock = threading.Lock()

    def client(self, protocol: str = "http", *, network_timeout_s: float = 60.0) -> Any:
        """A new tritonclient client. They are not thread-safe: make one per thread.
        ``network_timeout_s``: how long an HTTP client waits on its socket (labkit's own calls wait
        with their time limit instead, and give a longer one)."""
        return Transport.of(protocol).client(self.endpoints, network_timeout_s=network_timeout_s)

    def _mine(self) -> HttpClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = Transport.HTTP.client(self.endpoints, network_timeout_s=600.0)
            self._local.client = client
            with self._lock:
                self._clients.add(client)
        return client

    def close(self) -> None:
        """Close every thread's client (they talk to ports that are gone, or a stuck connection)."""
        with self._lock:
            clients, self._clients = list(self._clients), weakref.WeakSet()
            self._local = threading.local()
        for client in clients:
            try:
                client.close()
            except Exception:  # a client of another thread may refuse; the process cleans it up
                pass

    def call(
        self,
        what: str,
        fn: Callable[[Any], Any],
        refused: Callable[[InferenceServerException], LabkitError] | None = None,
    ) -> Any:
        """Run a control-plane call on this thread's HTTP client. A dead server, Triton's refusal
        (``refused`` makes the error) and a failed connection all become labkit errors."""
        if self.health.stopped:
            raise ServerNotRunningError(doing=f"Cannot {what}", stopped=True)
        try:
            return fn(self._mine())
        except (InferenceServerException, *CONNECTION_ERRORS) as exc:
            dead = self.health.dead_server_error(exc, f"Cannot {what}")
            if dead is not None:
                raise dead from None
            if isinstance(exc, InferenceServerException):
                raise (
                    refused(exc)
                    if refused
                    else ServerError(doing=f"Cannot {what}", reason="Triton refused", detail=exc.message())
                ) from None
            raise ServerError(
                doing=f"Cannot {what}",
                reason="Triton did not answer",
                detail=repr(exc),
                remedy="see server.logs.tail()",
            ) from None

    def ready(self) -> bool:
        """Whether Triton says it is ready (False while it is not listening yet)."""
        try:
            return bool(self._mine().is_server_ready())
        except Exception:  # not listening yet
            return False
