"""The wire under labkit's load generator: one request at a time per connection, on an asyncio loop.

Why not tritonclient's clients here: their per-request Python work (building the JSON header, parsing
the answer into an InferResult) costs ~150 µs of CPU, and on a 2-core machine that the server shares,
client CPU is throughput lost. A request whose inputs do not change is therefore serialized once
(tritonclient's own ``generate_request_body``, or a ModelInferRequest message) and its bytes re-sent;
answers are parsed by httptools (llhttp, in C) or by gRPC's own aio stack. Only a refusal's body is read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import grpc
import httptools
import numpy as np
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import (
    InferenceServerException,
    np_to_triton_dtype,
    serialize_byte_tensor,
)

from ..plumbing.transport import Transport
from . import sequence_ids
from .inference import prepare

Inputs = Mapping[str, np.ndarray]


class SequenceStep:
    """A request's place in a sequence of a stateful model: its sequence id, first / last request."""

    __slots__ = ("sequence_id", "start", "end")

    def __init__(self, sequence_id: int, start: bool, end: bool) -> None:
        self.sequence_id, self.start, self.end = sequence_id, start, end


class RequestExpired(Exception):
    """The request outlived its time limit; the connection was closed under it."""


class Request:
    """One request, ready to send as often as wanted: its wire form and the tritonclient inputs
    (what labkit's error translation compares with the model's config)."""

    __slots__ = ("wire", "tensors", "sequence_id")

    def __init__(self, wire: Any, tensors: list, sequence_id: int = 0) -> None:
        self.wire = wire
        self.tensors = tensors
        self.sequence_id = sequence_id


# -- HTTP ---------------------------------------------------------------------------------------------


def http_request(
    host: str, model: str, inputs: Inputs, outputs: Sequence[str] | None, step: SequenceStep | None = None
) -> Request:
    tensors, wanted = prepare(Transport.HTTP, inputs, outputs)
    sequence = (
        {}
        if step is None
        else {
            "sequence_id": step.sequence_id,
            "sequence_start": step.start,
            "sequence_end": step.end,
            "request_id": sequence_ids.tag("", step.sequence_id),
        }
    )
    body, json_size = httpclient.InferenceServerClient.generate_request_body(tensors, outputs=wanted, **sequence)
    head = f"POST /v2/models/{quote(model)}/infer HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
    if json_size is not None:  # binary tensors follow the JSON header: Triton needs to know where
        head += f"Inference-Header-Content-Length: {json_size}\r\n"
    return Request(head.encode() + b"\r\n" + body, tensors, step.sequence_id if step else 0)


class HttpConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection to Triton; ``send`` resolves to None, or raises
    InferenceServerException (Triton's refusal), ConnectionError or RequestExpired."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future | None = None
        self._status = 0
        self._body: list[bytes] = []
        self.started = 0.0  # when the request in flight was sent (loop time)

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        _, conn = await asyncio.get_running_loop().create_connection(cls, host, port)
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"Triton's HTTP answer could not be parsed: {exc}"))

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if self._status != 200:
            self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None or waiter.done():
            return
        if self._status == 200:
            waiter.set_result(None)
            return
        body, self._body = b"".join(self._body), []
        try:
            message = json.loads(body).get("error", "")
        except ValueError:
            message = body.decode(errors="replace")
        waiter.set_exception(InferenceServerException(msg=message or f"HTTP {self._status}", status=str(self._status)))

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._fail(ConnectionResetError("Triton closed the connection"))

    def _fail(self, exc: BaseException) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def send(self, request: Request) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        if self._transport is None:
            waiter.set_exception(ConnectionResetError("the connection is closed"))
            return waiter
        self.started = loop.time()
        self._transport.write(request.wire)
        return waiter

    @property
    def busy(self) -> bool:
        return self._waiter is not None

    def expire(self) -> None:
        """End the request in flight (it outlived its limit) and this connection with it."""
        self._fail(RequestExpired())
        self.close()  # the answer may still come; a fresh connection carries the next request

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    async def aclose(self) -> None:
        self.close()


# -- gRPC ---------------------------------------------------------------------------------------------


def grpc_request(
    model: str, inputs: Inputs, outputs: Sequence[str] | None, step: SequenceStep | None = None
) -> Request:
    tensors, _ = prepare(Transport.GRPC, inputs, outputs)
    message = service_pb2.ModelInferRequest(model_name=model)
    if step is not None:  # as tritonclient's own grpc client sets them
        message.id = sequence_ids.tag("", step.sequence_id)
        message.parameters["sequence_id"].int64_param = step.sequence_id
        message.parameters["sequence_start"].bool_param = step.start
        message.parameters["sequence_end"].bool_param = step.end
    for name, value in inputs.items():
        array = np.asarray(value)
        dtype = np_to_triton_dtype(array.dtype)
        message.inputs.add(name=name, datatype=dtype, shape=list(array.shape))
        raw = serialize_byte_tensor(array) if dtype == "BYTES" else array
        message.raw_input_contents.append(np.ascontiguousarray(raw).tobytes())
    for name in outputs or []:
        message.outputs.add(name=name)
    return Request(message, tensors, step.sequence_id if step else 0)


class GrpcConnection:
    """Unary ModelInfer calls on one grpc.aio channel; same contract as HttpConnection."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        self._call: Any = None
        self.started = 0.0

    @classmethod
    async def open(cls, host: str, port: int) -> GrpcConnection:
        return cls(grpc.aio.insecure_channel(f"{host}:{port}"))

    async def _infer(self, request: Request) -> None:
        self._call = self._stub.ModelInfer(request.wire)
        try:
            await self._call
        except asyncio.CancelledError:
            raise RequestExpired() from None
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.CANCELLED:
                raise RequestExpired() from None
            raise InferenceServerException(msg=exc.details() or "", status=str(exc.code())) from None
        finally:
            self._call = None

    def send(self, request: Request) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self.started = loop.time()
        return loop.create_task(self._infer(request))

    @property
    def busy(self) -> bool:
        return self._call is not None

    def expire(self) -> None:
        if self._call is not None:
            self._call.cancel()

    async def aclose(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()


CONNECTIONS: dict[Transport, type[HttpConnection] | type[GrpcConnection]] = {
    Transport.HTTP: HttpConnection,
    Transport.GRPC: GrpcConnection,
}


def build_request(
    transport: Transport,
    host: str,
    model: str,
    inputs: Inputs,
    outputs: Sequence[str] | None,
    step: SequenceStep | None = None,
) -> Request:
    if Transport.of(transport) is Transport.HTTP:
        return http_request(host, model, inputs, outputs, step)
    return grpc_request(model, inputs, outputs, step)
