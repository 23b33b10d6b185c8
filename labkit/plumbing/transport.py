"""The two ways to reach Triton, as one value: ``Transport.HTTP`` and ``Transport.GRPC``.

Everything that chooses between HTTP and gRPC asks a Transport instead of comparing strings: which
tritonclient module builds the requests, which of the server's URLs and ports to use, and how to make
a client. ``Transport.of("grpc")`` turns a ``protocol=`` argument into one, and refuses anything else
with UnknownProtocolError (naming the choices). A Transport is also its own name as a string
(``Transport.GRPC == "grpc"``), so results and tables keep showing "http" and "grpc".
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from enum import StrEnum
from types import ModuleType
from typing import Any

import gevent
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from ..errors import UnknownProtocolError
from .endpoints import Endpoints


class HttpClient(httpclient.InferenceServerClient):
    """tritonclient's HTTP client, closed at most once.

    tritonclient 2.41 closes a client again in ``__del__``, and its gevent pool refuses that second
    close (InvalidThreadUseError, printed as "Exception ignored in ... __del__") when the client is
    collected in another thread than the one that closed it, which a reference cycle (an exception's
    traceback holds the client) makes likely; later tritonclient releases close once the same way.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open = True  # not set on a client that could not be made: it has nothing to close
        _made_here().add(self)

    def close(self) -> None:
        if self.__dict__.pop("_open", False):  # one step: two threads closing at once close it once
            super().close()


_thread_clients = threading.local()


def _made_here() -> weakref.WeakSet[HttpClient]:
    """The HTTP clients this thread made that are still alive (there were some if it has the set)."""
    if not hasattr(_thread_clients, "made"):
        _thread_clients.made = weakref.WeakSet()
    return _thread_clients.made


def closing_http(target: Callable[..., Any]) -> Callable[..., Any]:
    """``target`` for a thread labkit starts: when it returns, the HTTP clients the thread made are
    closed in it, and the gevent hub they ran on is destroyed (gevent keeps a thread's hub, and two
    file descriptors, open after the thread ends)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return target(*args, **kwargs)
        finally:
            if hasattr(_thread_clients, "made"):  # gevent ran here
                for client in list(_thread_clients.made):
                    client.close()
                if threading.current_thread() is not threading.main_thread():
                    gevent.get_hub().destroy(destroy_loop=True)

    return run


class Transport(StrEnum):
    HTTP = "http"
    GRPC = "grpc"

    @classmethod
    def of(cls, protocol: str | Transport) -> Transport:
        """The Transport named ``protocol`` ("http" or "grpc"); UnknownProtocolError for anything else."""
        try:
            return cls(protocol)
        except ValueError:
            raise UnknownProtocolError(protocol=protocol, known=[t.value for t in cls]) from None

    @classmethod
    def choices(cls) -> list[str]:
        """The names a ``protocol=`` may take (for command-line choices and messages)."""
        return [t.value for t in cls]

    @property
    def module(self) -> ModuleType:
        """The tritonclient module of this transport (tritonclient.http or tritonclient.grpc)."""
        return httpclient if self is Transport.HTTP else grpcclient

    def url(self, where: Endpoints) -> str:
        """The URL (host:port) of ``where`` (a server's ``endpoints``) for this transport."""
        return where.http_url if self is Transport.HTTP else where.grpc_url

    def port(self, where: Endpoints) -> int:
        return where.http_port if self is Transport.HTTP else where.grpc_port

    def client(self, where: Endpoints, *, network_timeout_s: float = 60.0) -> Any:
        """A new tritonclient client of this transport for ``server`` (not thread-safe: one per thread).
        ``network_timeout_s`` is how long an HTTP client waits on its socket, and at most on connecting
        (tritonclient's 60 s otherwise; gRPC clients have no such limit)."""
        if self is Transport.HTTP:
            return HttpClient(
                self.url(where), network_timeout=network_timeout_s, connection_timeout=min(network_timeout_s, 60.0)
            )
        return grpcclient.InferenceServerClient(self.url(where))
