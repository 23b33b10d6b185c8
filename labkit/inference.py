"""Sending requests: a thin layer over tritonclient that turns Triton's refusals into labkit errors.

Which error a refusal becomes is decided from the server's state, never from Triton's words (its
HTTP status is 400 for all of them): a dead server -> ServerNotRunningError (decided by
TritonServer.dead_server_error), a model that is not loaded -> ModelNotFoundError, inputs that do not
fit the model's config -> RequestError naming what differs (labkit.request_fit), anything else (the
backend failed the request) -> InferenceError.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from . import request_fit
from .errors import InferenceError, LabkitError, ModelNotFoundError, RequestError
from .server.base import CONNECTION_ERRORS, TritonServer

_MODULES = {"http": httpclient, "grpc": grpcclient}


def _module(protocol: str) -> Any:
    try:
        return _MODULES[protocol]
    except KeyError:
        raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}") from None


def prepare(protocol: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str] | None = None) -> tuple[list, list | None]:
    """tritonclient input and requested-output objects for one request (reusable across requests)."""
    mod = _module(protocol)
    tensors = []
    for name, value in inputs.items():
        array = np.asarray(value)
        tensor = mod.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors, ([mod.InferRequestedOutput(n) for n in outputs] if outputs else None)


def translate(exc: BaseException, server: TritonServer, model: str, tensors: list) -> LabkitError:
    """The labkit error for a failed request (tritonclient's error or a broken connection);
    ``tensors`` are what was sent."""
    dead = server.dead_server_error(exc, f"The request to {model!r} failed")
    if dead is not None:
        return dead
    if not isinstance(exc, InferenceServerException):
        return InferenceError(f"The request to {model!r} failed: the connection broke ({exc!r}).", model=model)
    text = exc.message() or str(exc)
    try:
        loaded = server.loaded_models()
        config = server.model_config(model) if model in loaded else None
    except LabkitError:
        return InferenceError(f"The request to {model!r} failed: {text}", model=model)
    if config is None:
        return ModelNotFoundError(
            f"Model {model!r} is not loaded (loaded: {', '.join(loaded) or 'none'}). Load it with server.load({model!r}).",
            model=model, loaded=loaded,
        )
    sent = [(t.name(), t.datatype(), t.shape()) for t in tensors]
    problems = request_fit.mismatches(config, sent)
    if not problems:  # the request fits: the backend (or the model's kind) refused it
        return InferenceError(f"The request to {model!r} failed: {text}", model=model)
    expected, sent_text = request_fit.describe_inputs(config), request_fit.describe_sent(sent)
    return RequestError(
        f"Triton rejected the request to {model!r}: {text}\n"
        f"  what differs:      {'; '.join(problems)}\n"
        f"  the model expects: {expected}\n"
        f"  the request sent:  {sent_text}\n"
        f"(full config: server.model_config({model!r}))",
        model=model, reason=text, expected=expected, sent=sent_text,
    )


def infer(
    server: TritonServer,
    model: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str] | None = None,
    *,
    protocol: str = "http",
    client: Any = None,
) -> dict[str, np.ndarray]:
    """Send one request; returns the outputs by name. Pass ``client`` to reuse one (one per thread)."""
    own = client is None
    client = client or server.client(protocol)
    try:
        result = _send(server, client, model, inputs, outputs, protocol)
        names = outputs or [o["name"] for o in _output_meta(result, protocol)]
        return {n: result.as_numpy(n) for n in names}
    finally:
        if own:
            client.close()


def _send(
    server: TritonServer, client: Any, model: str, inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str] | None, protocol: str,
) -> Any:
    """One request on ``client``; Triton's refusals and a dead server become labkit errors."""
    tensors, wanted = prepare(protocol, inputs, outputs)
    server.track_request(model, 1)
    try:
        return client.infer(model, tensors, outputs=wanted)
    except (InferenceServerException, *CONNECTION_ERRORS) as exc:
        raise translate(exc, server, model, tensors) from None
    finally:
        server.track_request(model, -1)


def _output_meta(result: Any, protocol: str) -> list[dict]:
    if protocol == "http":
        return result.get_response()["outputs"]
    return [{"name": o.name} for o in result.get_response().outputs]


def infer_together(
    server: TritonServer,
    model: str,
    requests: Sequence[Mapping[str, np.ndarray]],
    outputs: Sequence[str] | None = None,
    *,
    protocol: str = "http",
) -> list[dict[str, np.ndarray]]:
    """Send several requests at the same moment (one client and thread each, released together), so
    that a batching model can execute them together; their outputs in the order given. The first
    failure is raised once every request has ended."""
    barrier = threading.Barrier(len(requests))
    answers: dict[int, dict[str, np.ndarray]] = {}
    failures: list[BaseException] = []

    def one(index: int) -> None:
        client = server.client(protocol)
        try:
            barrier.wait(timeout=30)
            answers[index] = infer(server, model, requests[index], outputs, protocol=protocol, client=client)
        except threading.BrokenBarrierError:
            pass  # another request failed first; its error is the one to report
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(exc)
            barrier.abort()  # the others must not wait for this one
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(i,), name=f"labkit-together-{i}") for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return [answers[i] for i in range(len(requests))]


# -- decoupled models and response parameters ---------------------------------------------------


def stream_infer(
    server: TritonServer,
    model: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str] | None = None,
    *,
    timeout_s: float = 30.0,
) -> list[dict[str, np.ndarray]]:
    """Send one request over a gRPC stream and collect every response, in the order sent.

    A decoupled model (``model_transaction_policy { decoupled: true }``) may answer one request with
    any number of responses, and only gRPC streaming carries them (HTTP refuses such models). The
    server is asked for an empty final response, so the end is known even after zero responses.
    """
    answers: "queue.Queue[tuple[Any, Any]]" = queue.Queue()
    client = server.client("grpc")
    tensors, wanted = prepare("grpc", inputs, outputs)
    collected: list[dict[str, np.ndarray]] = []
    server.track_request(model, 1)
    try:
        try:
            client.start_stream(callback=lambda result, error: answers.put((result, error)))
            client.async_stream_infer(model, tensors, outputs=wanted, enable_empty_final_response=True)
        except InferenceServerException as exc:
            raise translate(exc, server, model, tensors) from None
        while True:
            try:
                result, error = answers.get(timeout=timeout_s)
            except queue.Empty:
                if server.gone(within_s=0.0):
                    raise server.exited_error(f"The stream to {model!r} broke off") from None
                raise InferenceError(
                    f"{model!r} sent {len(collected)} response(s), then nothing for {timeout_s:.0f} s and no final "
                    f"flag. A decoupled model must end every request with "
                    f"send(flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL); raise timeout_s if it is just slow.",
                    model=model,
                ) from None
            if error is not None:
                raise translate(error, server, model, tensors) from None
            response = result.get_response()
            if response.outputs:
                names = outputs or [o.name for o in response.outputs]
                collected.append({n: result.as_numpy(n) for n in names})
            final = response.parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return collected
    finally:
        server.track_request(model, -1)
        try:
            client.stop_stream()
        except InferenceServerException:
            pass  # a stream that broke cannot be stopped politely; closing the client ends it
        finally:
            client.close()


def _parameter_value(param: Any) -> Any:
    """A gRPC InferParameter as a Python value (its one set field)."""
    kind = param.WhichOneof("parameter_choice")
    return getattr(param, kind) if kind else None


def infer_with_parameters(
    server: TritonServer,
    model: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str] | None = None,
    *,
    protocol: str = "http",
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Send one request; return its outputs and the parameters the backend set on the response
    (TRITONBACKEND_ResponseSet{String,Int,Bool}Parameter) as str, int and bool values."""
    client = server.client(protocol)
    try:
        result = _send(server, client, model, inputs, outputs, protocol)
        response = result.get_response()
        names = outputs or [o["name"] for o in _output_meta(result, protocol)]
        if protocol == "http":  # JSON already gives str / int / bool
            params = dict(response.get("parameters", {}))
        else:
            params = {k: _parameter_value(v) for k, v in response.parameters.items()}
        return {n: result.as_numpy(n) for n in names}, params
    finally:
        client.close()
