"""A request under way, waited for in short steps: the protocol every wait in labkit uses (``Pending``),
and its two kinds. An HTTP request runs in a greenlet of the calling thread (tritonclient's HTTP client
runs on gevent); a gRPC or streamed one answers on a callback from another thread. The server's own
load calls and the client's requests both wait on these (labkit.client.waiting adds breakpoints,
dropped requests and the stuck report)."""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any, Protocol

import gevent

from ..errors import InferenceError

POLL_S = 0.1
#: HTTP clients labkit makes for one call wait on their socket this long; the time limit decides sooner.
SOCKET_TIMEOUT_S = 7 * 24 * 3600.0


class Pending(Protocol):
    """A request under way: ``wait(seconds)`` returns whether it has an answer; ``result()`` gives
    it (or raises the request's error); ``cancel()`` stops waiting for it. Any object with these three
    methods is one (HttpPending, CallbackPending); none needs to inherit from this."""

    def wait(self, seconds: float) -> bool: ...

    def result(self) -> Any: ...

    def cancel(self) -> None: ...


class HttpPending:
    """An HTTP request in a greenlet of the calling thread (tritonclient's HTTP client runs on gevent)."""

    def __init__(self, send: Callable[[], Any]) -> None:
        hub = gevent.get_hub()
        # A kernel interrupt that lands while gevent's loop runs is passed on to us (and handled in
        # wait_for); gevent would also print it to stderr, which a notebook shows as an error.
        if not issubclass(KeyboardInterrupt, hub.NOT_ERROR):
            hub.NOT_ERROR = (*hub.NOT_ERROR, KeyboardInterrupt)
        self._greenlet = gevent.spawn(self._run, send)

    @staticmethod
    def _run(send: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        try:
            return send(), None
        except Exception as exc:  # noqa: BLE001 - handed to result(); gevent would print it too
            return None, exc

    def wait(self, seconds: float) -> bool:
        self._greenlet.join(timeout=seconds)
        return self._greenlet.ready()

    def result(self) -> Any:
        value, error = self._greenlet.get()
        if error is not None:
            raise error
        return value

    def cancel(self) -> None:
        self._greenlet.kill(block=False)


class CallbackPending:
    """A request whose answer comes to a callback on another thread (gRPC's async_infer, streams)."""

    def __init__(self) -> None:
        self._answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self._next: tuple[Any, Any] | None = None
        self.on_cancel: Callable[[], None] = lambda: None

    def callback(self, result: Any, error: Any) -> None:
        self._answers.put((result, error))

    def wait(self, seconds: float) -> bool:
        if self._next is None:
            try:
                self._next = self._answers.get(timeout=seconds)
            except queue.Empty:
                return False
        return True

    def result(self) -> Any:
        """The next answer (a stream has several); raises its error."""
        if self._next is None:
            raise InferenceError(
                happened="has no answer yet: result() was called before one arrived",
                remedy="call result() after wait() has returned True",
            )
        (result, error), self._next = self._next, None
        if error is not None:
            raise error
        return result

    def cancel(self) -> None:
        self.on_cancel()
