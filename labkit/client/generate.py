"""Decoupled models over HTTP: Triton's generate extension (``POST v2/models/<m>/generate_stream``),
which 23.12 serves beside the gRPC stream (labkit.client.inference.stream_infer) while ``/infer`` refuses
decoupled models. Its request is one JSON object (an input per field, one element each; other
fields become request parameters); its answer, server-sent events, one ``data: <JSON>`` line per
response, until the model's final flag ends the stream.

Refusals become labkit errors as labkit.client.inference decides them, from the server's state and what was
sent, never from Triton's words: a model that is not loaded -> ModelNotFoundError, fields that do
not fit the model's inputs as the extension reads them -> RequestError naming what differs, an error
response in the stream -> InferenceError.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import numpy as np

from ..errors import InferenceError, LabkitError, RequestError
from ..plumbing.pending import CallbackPending
from ..server.base import TritonServer
from ..server.connection import CONNECTION_ERRORS
from . import request_fit, waiting
from .inference import refused_config

#: What generate_stream returns of an event beside the outputs: who answered, not what.
_NOT_OUTPUTS = ("model_name", "model_version")
#: How long generate_stream may take to connect and send; the wait for its responses is the request's time limit.
_CONNECT_S = 10.0


class _StreamEnd:
    """The reader's mark for a stream that ended (the final flag closed it)."""


class _Refused(Exception):
    """generate_stream's reply was an HTTP error before any event: Triton's words for it."""

    def __init__(self, status: int, text: str) -> None:
        self.status, self.text = status, text
        super().__init__(f"HTTP {status}: {text}")


def _json_value(value: Any) -> Any:
    """A value as the generate extension's JSON takes it (numpy arrays and scalars as Python lists and numbers)."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value


def _elements(value: Any) -> int:
    """How many elements a JSON field holds (nested lists counted through; a string is one)."""
    if isinstance(value, (list, tuple)):
        return sum(_elements(v) for v in value)
    return 1


def _field_kind(value: Any) -> str:
    """ "string", "bool" or "number": the first element's JSON kind (what Triton converts it from)."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return "string" if isinstance(value, str) else "bool" if isinstance(value, bool) else "number"


def _mismatches(config: dict, fields: Mapping[str, Any]) -> list[str]:
    """What in a generate request's JSON ``fields`` does not fit the model's inputs, as Triton 23.12's
    generate extension reads them (one element per input; a field that names no input is a request parameter)."""
    problems = []
    for spec in config.get("input", []):
        name, datatype = spec["name"], spec["data_type"].removeprefix("TYPE_").replace("STRING", "BYTES")
        if name not in fields:
            if not spec.get("optional", False):
                problems.append(f"input {name!r} is missing")
            continue
        count = _elements(fields[name])
        if count != 1:
            problems.append(f"{name} carries {count} elements; generate takes one element per input")
        kind, wanted = (
            _field_kind(fields[name]),
            ("string" if datatype == "BYTES" else "bool" if datatype == "BOOL" else "number"),
        )
        if count and kind != wanted:
            problems.append(f"{name} is a JSON {kind}, the model takes {datatype}")
    return problems


def _refusal_error(server: TritonServer, model: str, fields: Mapping[str, Any], text: str, since: float) -> LabkitError:
    """The labkit error for Triton's refusal of a generate request (``text``: its words), decided from
    the server's state and the fields sent, as ``translate`` does for /infer."""
    config = refused_config(server, model, text, since)
    if isinstance(config, LabkitError):
        return config
    problems = _mismatches(config, fields)
    if not problems:
        return InferenceError(model=model, reason=text)
    expected = request_fit.describe_inputs(config)
    sent = ", ".join(f"{name}={value!r}" for name, value in fields.items()) or "no fields"
    several = any(_elements(fields[i["name"]]) != 1 for i in config.get("input", []) if i["name"] in fields)
    advice = (
        "Triton 23.12's generate extension takes one element per input: send a list of several over gRPC "
        "(labkit.stream_infer), or one element per request here."
        if several
        else "Send one field per input the model expects, each one element of the input's datatype."
    )
    return RequestError(model=model, reason=text, expected=expected, sent=sent, differs=problems, remedy=advice)


def generate_stream(
    server: TritonServer,
    model: str,
    inputs: Mapping[str, Any],
    *,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Send one request over HTTP to Triton's generate extension (``POST v2/models/<model>/generate_stream``,
    server-sent events) and collect every response, in the order sent: each as its outputs by name, as the
    event's JSON carries them (one element: a number or string; more: a list).

    HTTP's way to a decoupled model, whose requests ``/infer`` refuses. ``inputs``: the request's JSON
    fields, one element per input (``{"IN": 4}`` or ``{"IN": [4]}``; numpy values are sent as lists); a
    field that names no input reaches the model as a request parameter.
    Triton 23.12 refuses an input of several elements (RequestError; ``differs`` names it): a gRPC
    stream (``stream_infer``) carries those. An error response in the stream raises InferenceError.
    ``timeout_s`` (default ``server.config.request_timeout_s``) limits the wait for each next response.
    """
    fields = {name: _json_value(value) for name, value in inputs.items()}
    body = _json_body(model, fields)
    path = f"/v2/models/{quote(model, safe='')}/generate_stream"
    limit = waiting.limit_of(server, timeout_s)
    # http.client rather than requests: the helper owns the socket, so a wait given up on (time limit,
    # interrupt) can shut it and end the reader, which requests offers no way to do from another thread.
    connection = http.client.HTTPConnection(server.endpoints.host, server.endpoints.http_port, timeout=_CONNECT_S)
    pending = CallbackPending()
    collected: list[dict[str, Any]] = []

    read = _reader(connection, path, body, pending)
    pending.on_cancel = lambda: _shut(connection)
    hint = lambda: (  # noqa: E731 - said only when the wait ends without the stream's end
        f"It sent {len(collected)} response(s) so far and the stream did not end: a decoupled model must end "
        f"every request with send(flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL)."
    )
    since = time.time()
    server.health.track_request(model, 1)
    try:
        # Read on a thread of its own, so that wait_for keeps the time limit and kernel interrupts.
        threading.Thread(target=read, name=f"labkit-generate-{model}", daemon=True).start()
        while True:
            waiting.wait_for(server, model, pending, limit, extra=hint)
            try:
                event = pending.result()
            except _Refused as exc:
                raise _refusal_error(server, model, fields, exc.text, since) from None
            except CONNECTION_ERRORS as exc:
                dead = server.health.dead_server_error(exc, f"The request to {model!r} failed")
                raise dead or InferenceError(
                    model=model,
                    happened="failed: the connection broke",
                    reason=repr(exc),
                    remedy="check that the server runs (lab.logs.tail()) and send it again",
                ) from None
            if isinstance(event, _StreamEnd):
                return collected
            if "error" in event:
                raise _refusal_error(server, model, fields, str(event["error"]), since) from None
            collected.append({k: v for k, v in event.items() if k not in _NOT_OUTPUTS})
    finally:
        server.health.track_request(model, -1)


def _json_body(model: str, fields: dict[str, Any]) -> str:
    """The request's JSON; RequestError (nothing sent) for fields JSON cannot hold."""
    try:
        return json.dumps(fields)
    except (TypeError, ValueError) as exc:
        raise RequestError(
            model=model,
            refused_by="labkit",
            reason=f"its fields cannot be written as JSON ({exc})",
            remedy="Give each input as a number, a string or a list of them (or a numpy array)",
            sent=repr(fields),
            differs=[str(exc)],
        ) from None


def _reader(
    connection: http.client.HTTPConnection, path: str, body: str, pending: CallbackPending
) -> Callable[[], None]:
    """What the reading thread runs: send the request, then hand each event (a _StreamEnd last, or the
    refusal or failure) to ``pending``; the connection is closed when it ends."""

    def read() -> None:
        try:
            connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            connection.sock.settimeout(None)  # connected: from here on the time limit is wait_for's
            reply = connection.getresponse()
            if reply.status != 200:
                raw = reply.read().decode("utf-8", "replace")
                try:
                    refusal = json.loads(raw)
                except ValueError:
                    refusal = None
                text = str(refusal["error"]) if isinstance(refusal, dict) and "error" in refusal else raw
                pending.callback(None, _Refused(reply.status, text))
                return
            # Events are "data: <JSON>" lines, blank lines between them (Triton sends no other SSE field),
            # so a line filter reads them; no SSE library is among labkit's dependencies.
            while line := reply.readline():
                if line.startswith(b"data:"):
                    try:
                        event = json.loads(line[len(b"data:") :])
                    except ValueError:
                        pending.callback(None, _Refused(reply.status, f"an event that is not JSON: {line!r}"))
                        return
                    pending.callback(event, None)
            pending.callback(_StreamEnd(), None)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it as a labkit error
            pending.callback(None, exc)
        finally:
            connection.close()

    return read


def _shut(connection: http.client.HTTPConnection) -> None:
    """Shut the connection's socket, which wakes the reader blocked on it (a wait given up on)."""
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: the reader has ended
