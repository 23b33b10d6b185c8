"""Sending requests: a thin layer over tritonclient that turns Triton's refusals into labkit errors, and waits
for answers within a time limit (labkit.client.waiting: a stuck model raises RequestTimeoutError showing where
it is stuck; a breakpoint in model.py opens its pdb session in the caller's cell). Which error a refusal
becomes is decided from the server's state, never from Triton's words (its HTTP status is 400 for all of
them): a dead server -> ServerNotRunningError (TritonServer.dead_server_error), a model that is not loaded ->
ModelNotFoundError, inputs that do not fit the model's config -> RequestError naming what differs
(labkit.client.request_fit), a request without a sequence id to a model with sequence batching ->
SequenceError, anything else (the backend failed the request, an answer that does not fill its shape) ->
InferenceError.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tritonclient.utils import (
    InferenceServerException,
    np_to_triton_dtype,
    triton_to_np_dtype,
)

from .. import breakpoints
from ..errors import (
    ConfigError,
    InferenceError,
    InputSizeError,
    LabkitError,
    ModelNotFoundError,
    OutputNameError,
    RequestError,
    SequenceError,
)
from ..plumbing.pending import SOCKET_TIMEOUT_S, CallbackPending, HttpPending, Pending
from ..plumbing.transport import Transport, closing_http
from ..server import shm_regions, stubs
from ..server.base import TritonServer
from ..server.connection import CONNECTION_ERRORS
from . import request_fit, sequence_ids, waiting
from .infer_parameters import request_parameters


def prepare(
    protocol: str | Transport, inputs: Mapping[str, Any], outputs: Sequence[str] | None = None
) -> tuple[list, list | None]:
    """tritonclient input and requested-output objects for one request (reusable across requests).
    An input may also be a tritonclient ``InferInput`` of that protocol, built by hand: it is sent as it is."""
    mod = Transport.of(protocol).module
    tensors = []
    for name, value in inputs.items():
        if isinstance(value, mod.InferInput):
            tensors.append(value)
            continue
        array = np.asarray(value)
        tensor = mod.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors, ([mod.InferRequestedOutput(n) for n in outputs] if outputs else None)


def _output_names(config: dict) -> list[str]:
    return [o["name"] for o in config.get("output", [])]


def _output_error(
    model: str, missing: Sequence[str], config: dict, produced: Sequence[str], asked: bool
) -> OutputNameError:
    outputs = _output_names(config)
    return OutputNameError(model=model, missing=missing, outputs=outputs, produced=produced, asked=asked)


def _strings_in(raw: bytes) -> int:
    """How many length-prefixed strings a BYTES tensor's data holds (4-byte little-endian lengths)."""
    count, at = 0, 0
    while at + 4 <= len(raw):
        at += 4 + int.from_bytes(raw[at : at + 4], "little")
        count += 1
    return count if at == len(raw) else -1  # -1: the last string is cut short


def check_sizes(model: str, tensors: list) -> None:
    """InputSizeError for an input whose data does not fill its declared shape, before anything is
    sent (Triton 23.12 does not check; a Python stub asked for 1 GiB that never came dies)."""
    for tensor in tensors:
        getter = getattr(tensor, "_get_binary_data", None) or getattr(tensor, "_get_content", None)
        raw = getter() if getter is not None else None
        if raw is None:
            continue  # JSON values or shared memory: tritonclient sizes those itself
        count = int(np.prod(tensor.shape(), dtype=np.int64))
        if tensor.datatype() == "BYTES":
            unit, needed, carried = "strings", count, _strings_in(raw)
        else:
            itemsize = 2 if tensor.datatype() == "BF16" else np.dtype(triton_to_np_dtype(tensor.datatype())).itemsize
            unit, needed, carried = "bytes", count * itemsize, len(raw)
        if needed != carried:
            raise InputSizeError(
                model=model,
                input=tensor.name(),
                declared=f"shape {list(tensor.shape())} {tensor.datatype()}",
                needed=needed,
                carried=carried,
                unit=unit,
            )


def refused_config(server: TritonServer, model: str, text: str, since: float | None) -> dict | LabkitError:
    """The config to compare a refused request with (Triton's words: ``text``), or the error that explains the
    refusal first: a Python stub of ``model`` that ended since ``since``, a model not loaded, a silent server."""
    ended = stubs.exits(server.workspace.backend_dir / "python", model, since) if since is not None else []
    if ended:
        return InferenceError(
            model=model,
            reason=text,
            detail=stubs.describe(ended),
            remedy="Triton starts a new stub for the next request; fix the model (lab.python_model) to stop it ending",
        )
    try:
        loaded = server.loaded_models()
        config = server.model_config(model) if model in loaded else None
    except LabkitError:
        return InferenceError(model=model, reason=text)
    return ModelNotFoundError(model=model, loaded=loaded) if config is None else config


def translate(
    exc: BaseException,
    server: TritonServer,
    model: str,
    tensors: list,
    since: float | None = None,
    outputs: Sequence[str] = (),
    sequence_id: int | str = 0,
) -> LabkitError:
    """The labkit error for a failed request (tritonclient's error or a broken connection);
    ``tensors`` are what was sent, ``outputs`` the names it asked for, ``sequence_id`` its sequence (0:
    none); ``since`` (time.time() when it was sent) lets the error say how a Python stub of the model
    ended meanwhile."""
    dead = server.health.dead_server_error(exc, f"The request to {model!r} failed")
    if dead is not None:
        return dead
    if not isinstance(exc, InferenceServerException):
        return InferenceError(
            model=model,
            happened="failed: the connection broke",
            reason=repr(exc),
            remedy="check that the server runs (lab.logs.tail()) and send it again",
        )
    text = exc.message() or str(exc)
    config = refused_config(server, model, text, since)
    if isinstance(config, LabkitError):
        return config
    sent = [(t.name(), t.datatype(), t.shape()) for t in tensors]
    problems = request_fit.mismatches(config, sent)
    unknown = [n for n in outputs if n not in _output_names(config)]
    if not problems and unknown:
        return _output_error(model, unknown, config, [], asked=True)
    if not problems and "sequence_batching" in config and not sequence_id:  # Triton refuses these, always
        return SequenceError(model=model, sequence_id=sequence_id, problem="no-sequence-id", reason=text)
    rows = [t.shape()[0] for t in tensors if t.shape()] if int(config.get("max_batch_size", 0)) > 0 else []
    if not problems and "sequence_batching" in config and any(r != 1 for r in rows):  # refused, always
        return SequenceError(model=model, sequence_id=sequence_id, problem="rows", rows=max(rows), reason=text)
    if not problems and shm_regions.serves_python(server, config):
        short = shm_regions.refusal(server, model, request_fit.payload_bytes(tensors), text)
        if short is not None:
            return short
    if not problems:  # the request fits: the backend (or the model's kind) refused it
        return InferenceError(model=model, reason=text)
    expected, sent_text = request_fit.describe_inputs(config), request_fit.describe_sent(sent)
    return RequestError(
        model=model,
        reason=text,
        expected=expected,
        sent=sent_text,
        differs=problems,
        remedy=f"(full config: server.model_config({model!r}))",
    )


def infer(
    server: TritonServer,
    model: str,
    inputs: Mapping[str, Any],
    outputs: Sequence[str] | None = None,
    *,
    protocol: str = "http",
    client: Any = None,
    timeout_s: float | None = None,
    shared_memory: str | None = None,
    sequence_id: int | str = 0,
    sequence_start: bool = False,
    sequence_end: bool = False,
    parameters: Mapping[str, str | int | bool] | None = None,
) -> dict[str, np.ndarray]:
    """Send one request; returns the outputs by name. Pass ``client`` to reuse one (one per thread).
    ``inputs``: numpy arrays (or tritonclient InferInputs) by name; one whose data does not fill its
    shape is refused before sending (InputSizeError).

    ``sequence_id`` / ``sequence_start`` / ``sequence_end``: the request belongs to that sequence of a
    stateful model (sequence_batching), and is its first / last request. A stateful model refuses a
    request without one (SequenceError).

    ``parameters``: the request's own parameters (strings, integers, booleans), tritonclient's
    ``parameters=``; a backend reads them (``request.parameters()``, TRITONBACKEND_RequestParameter).

    ``timeout_s``: how long to wait for the answer (default ``server.config.request_timeout_s``; ``math.inf``
    waits forever); then RequestTimeoutError shows where the model is stuck.
    ``shared_memory="cuda"``: inputs and outputs go through CUDA shared-memory regions on GPU 0
    (labkit.gpu.shared_memory; HTTP, a client of its own, the server's time limits of a plain HTTP
    client): GpuUnavailableError where no GPU or cuda-python is.
    """
    if shared_memory is not None:
        from ..gpu import (
            shared_memory as gpu_shm,  # cuda-python only where it is asked for
        )

        if shared_memory not in gpu_shm.KINDS:
            raise ConfigError(
                problem="is not a kind of shared memory",
                remedy="use 'cuda' (or leave it out)",
                field="shared_memory",
                value=shared_memory,
                valid=list(gpu_shm.KINDS),
            )
        if sequence_id or parameters:
            raise ConfigError(
                problem="sends plain requests",
                remedy="leave it out for a sequence's requests or a request with parameters",
                field="shared_memory",
                value=shared_memory,
                valid=["None"],
            )
        if Transport.of(protocol) is not Transport.HTTP or client is not None:
            raise ConfigError(
                problem="sends over HTTP with a client of its own",
                remedy="leave protocol and client out",
                field="shared_memory",
                value=shared_memory,
                valid=["protocol='http'"],
            )
        return gpu_shm.infer(server, model, inputs, outputs, lambda exc, sent: translate(exc, server, model, sent))
    transport = Transport.of(protocol)
    sequence = {"sequence_id": sequence_id, "sequence_start": sequence_start, "sequence_end": sequence_end}
    extra = {**sequence, **request_parameters(parameters)}
    result = _send(server, client, model, inputs, outputs, transport, timeout_s, extra)
    return _answer(server, model, result, transport, outputs)


def _answer(
    server: TritonServer, model: str, result: Any, transport: Transport, outputs: Sequence[str] | None
) -> dict[str, np.ndarray]:
    """The outputs by name. Triton drops a tensor whose name the config does not know: OutputNameError when an
    output asked for is not in the answer, or (none asked for) when the answer is empty and the config declares
    outputs. An answer with some declared outputs is returned as it is (a model may leave one out)."""
    produced = [o["name"] for o in _output_meta(result, transport)]
    if outputs:
        missing = [n for n in outputs if n not in produced]
        if missing:
            raise _output_error(model, missing, server.model_config(model), produced, asked=True)
        return {n: _tensor(result, n, model) for n in outputs}
    if not produced:
        config = server.model_config(model)
        if _output_names(config):
            raise _output_error(model, _output_names(config), config, produced, asked=False)
    return {n: _tensor(result, n, model) for n in produced}


def _tensor(result: Any, name: str, model: str) -> np.ndarray:
    """One output; data that do not fill its shape (a numpy 2 environment under 23.12's stub) raise InferenceError."""
    try:
        return result.as_numpy(name)
    except ValueError as exc:
        raise InferenceError(
            model=model,
            happened=f"was answered with output {name!r}",
            reason="output data do not fill its shape",
            detail=str(exc),
            remedy="A Python model does so under Triton 23.12 when its execution environment has numpy 2: build it with numpy<2 (labkit.python_env does)",
        ) from None


def _send(
    server: TritonServer,
    client: Any,
    model: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str] | None,
    transport: Transport,
    timeout_s: float | None,
    sequence: Mapping[str, Any] | None = None,
) -> Any:
    """One request on ``client`` (a new one if None), waited for within its time limit; Triton's
    refusals and a dead server become labkit errors. ``sequence``: tritonclient's sequence_* keywords
    (and ``parameters``)."""
    sequence = dict(sequence or {})
    tensors, wanted = prepare(transport, inputs, outputs)
    check_sizes(model, tensors)
    limit = waiting.limit_of(server, timeout_s)
    own = client is None
    if own:
        client = server.client(transport, network_timeout_s=SOCKET_TIMEOUT_S)
    request_id = sequence_ids.tag(
        breakpoints.request_id() if waiting.interactive() else "", sequence.get("sequence_id", 0)
    )
    since = time.time()
    log_mark = server.logs.mark()
    server.health.track_request(model, 1)
    try:
        if transport is Transport.HTTP:
            pending: Pending = HttpPending(
                lambda: client.infer(model, tensors, outputs=wanted, request_id=request_id, **sequence)
            )
        else:
            pending = CallbackPending()
            call = client.async_infer(
                model, tensors, pending.callback, outputs=wanted, request_id=request_id, **sequence
            )
            pending.on_cancel = call.cancel
        session = waiting.wait_for(server, model, pending, limit, request_id, log_mark=log_mark)
        try:
            return pending.result()
        except (InferenceServerException, *CONNECTION_ERRORS) as exc:
            if session.quit:
                raise InferenceError(
                    model=model,
                    happened="failed because you quit the debugger (q) at its breakpoint; the model keeps serving",
                    remedy="Continue with c to let a request finish",
                ) from None
            raise translate(exc, server, model, tensors, since, outputs or (), sequence.get("sequence_id", 0)) from None
    finally:
        server.health.track_request(model, -1)
        if own:
            client.close()


def _output_meta(result: Any, transport: Transport) -> list[dict]:
    if transport is Transport.HTTP:
        return result.get_response()["outputs"]
    return [{"name": o.name} for o in result.get_response().outputs]


def infer_together(
    server: TritonServer,
    model: str,
    requests: Sequence[Mapping[str, np.ndarray]],
    outputs: Sequence[str] | None = None,
    *,
    protocol: str = "http",
    timeout_s: float | None = None,
) -> list[dict[str, np.ndarray]]:
    """Send several requests at the same moment (one client and thread each, released together), so
    that a batching model can execute them together; their outputs in the order given. The first
    failure is raised once every request has ended. ``timeout_s`` as for ``infer``."""
    protocol = Transport.of(protocol)  # a wrong one is refused here, before any thread starts
    barrier = threading.Barrier(len(requests))
    answers: dict[int, dict[str, np.ndarray]] = {}
    failures: list[BaseException] = []

    def one(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            answers[index] = infer(server, model, requests[index], outputs, protocol=protocol, timeout_s=timeout_s)
        except threading.BrokenBarrierError:
            pass  # another request failed first; its error is the one to report
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(exc)
            barrier.abort()  # the others must not wait for this one

    threads = [
        threading.Thread(target=closing_http(one), args=(i,), name=f"labkit-together-{i}") for i in range(len(requests))
    ]
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
    timeout_s: float | None = None,
) -> list[dict[str, np.ndarray]]:
    """Send one request over a gRPC stream and collect every response, in the order sent.

    A decoupled model (``model_transaction_policy { decoupled: true }``) may answer one request with
    any number of responses. A gRPC stream carries them whatever the inputs' shapes; over HTTP, ``/infer``
    refuses such models and ``labkit.generate_stream`` takes one element per input. The server is asked for an
    empty final response, so the end is known even after zero responses.
    ``timeout_s`` (default ``server.config.request_timeout_s``) limits the wait for each next response.
    """
    tensors, wanted = prepare(Transport.GRPC, inputs, outputs)
    check_sizes(model, tensors)
    client = server.client(Transport.GRPC)
    limit = waiting.limit_of(server, timeout_s)
    request_id = breakpoints.request_id() if waiting.interactive() else ""
    pending = CallbackPending()
    pending.on_cancel = lambda: client.stop_stream(cancel_requests=True)  # else it waits for the server
    collected: list[dict[str, np.ndarray]] = []
    hint = lambda: (  # noqa: E731 - said only when the wait ends without the final flag
        f"It sent {len(collected)} response(s) so far and no final flag: a decoupled model must end every "
        f"request with send(flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL)."
    )
    since = time.time()
    log_mark = server.logs.mark()
    server.health.track_request(model, 1)
    try:
        try:
            client.start_stream(callback=pending.callback)
            client.async_stream_infer(
                model, tensors, outputs=wanted, enable_empty_final_response=True, request_id=request_id
            )
        except InferenceServerException as exc:
            raise translate(exc, server, model, tensors, since) from None
        while True:
            waiting.wait_for(server, model, pending, limit, request_id, extra=hint, log_mark=log_mark)
            try:
                result = pending.result()
            except InferenceServerException as exc:
                raise translate(exc, server, model, tensors, since) from None
            response = result.get_response()
            if response.outputs:
                names = outputs or [o.name for o in response.outputs]
                collected.append({n: _tensor(result, n, model) for n in names})
            final = response.parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return collected
    finally:
        server.health.track_request(model, -1)
        try:
            client.stop_stream(cancel_requests=True)  # after the final response there is nothing to cancel
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
    timeout_s: float | None = None,
    parameters: Mapping[str, str | int | bool] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Send one request; return its outputs and the parameters the backend set on the response
    (TRITONBACKEND_ResponseSet{String,Int,Bool}Parameter) as str, int and bool values.
    ``timeout_s`` and ``parameters`` (the request's) as for ``infer``."""
    transport = Transport.of(protocol)
    result = _send(server, None, model, inputs, outputs, transport, timeout_s, request_parameters(parameters))
    response = result.get_response()
    if transport is Transport.HTTP:  # JSON already gives str / int / bool
        params = dict(response.get("parameters", {}))
    else:
        params = {k: _parameter_value(v) for k, v in response.parameters.items()}
    return _answer(server, model, result, transport, outputs), params
