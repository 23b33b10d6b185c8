"""A check's own gRPC streams to a decoupled model: every response as the client receives it, with the
final flag it carried (``triton_final_response``; the server is asked for an empty final response, so a
flag sent without data shows as a response without outputs) and when it came. One stream carries one
request, so that a check can cancel one request and leave the others going."""

from __future__ import annotations

import queue
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from ...server.base import TritonServer


@dataclass(frozen=True)
class Reply:
    """One response: its outputs, whether it was the request's last (an error is), Triton's error message."""

    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    final: bool = False
    error: str = ""
    at: float = 0.0  # time.monotonic() when the client received it

    def value(self, name: str) -> int | None:
        return int(self.outputs[name].reshape(-1)[0]) if name in self.outputs else None


class Stream:
    """A gRPC stream that carries one request to ``model``; ``read()`` collects its responses."""

    def __init__(self, server: TritonServer, model: str, inputs: Mapping[str, np.ndarray]) -> None:
        self._queue: queue.Queue[Reply] = queue.Queue()
        self.replies: list[Reply] = []
        self.sent = time.monotonic()
        self._client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
        tensors = []
        for name, array in inputs.items():
            tensors.append(grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype)))
            tensors[-1].set_data_from_numpy(array)
        try:
            self._client.start_stream(callback=self._received)
            self._client.async_stream_infer(model, tensors, enable_empty_final_response=True)
        except InferenceServerException as exc:
            self._queue.put(Reply(final=True, error=exc.message() or str(exc), at=time.monotonic()))

    def _received(self, result: grpcclient.InferResult | None, error: InferenceServerException | None) -> None:
        now = time.monotonic()
        if error is not None or result is None:
            self._queue.put(Reply(final=True, error=error.message() if error else "no response", at=now))
            return
        response = result.get_response()
        outputs = {o.name: result.as_numpy(o.name) for o in response.outputs}
        flag = response.parameters.get("triton_final_response")
        self._queue.put(
            Reply({k: v for k, v in outputs.items() if v is not None}, bool(flag and flag.bool_param), "", now)
        )

    def next(self, timeout_s: float) -> Reply | None:
        """The next response, or None if none came within ``timeout_s``."""
        try:
            reply = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
        self.replies.append(reply)
        return reply

    def read(self, timeout_s: float) -> bool:
        """Read responses until the final one; False if ``timeout_s`` passed between two of them first."""
        while not (self.replies and self.replies[-1].final):
            if self.next(timeout_s) is None:
                return False
        return True

    @property
    def ended(self) -> bool:
        return bool(self.replies) and self.replies[-1].final

    def cancel(self) -> None:
        """Stop the stream, cancelling its request (tritonclient's ``stop_stream(cancel_requests=True)``)."""
        try:
            self._client.stop_stream(cancel_requests=True)
        except InferenceServerException:
            pass  # a stream that broke is stopped already

    def close(self) -> None:
        self.cancel()
        self._client.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
