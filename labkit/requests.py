"""Sending requests: a thin layer over tritonclient that turns Triton's refusals into labkit errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from .errors import AnswerMismatchError, InferenceError, ModelNotFoundError, RequestError
from .server.base import CONNECTION_ERRORS, TritonServer

_MODULES = {"http": httpclient, "grpc": grpcclient}
# Phrases in Triton 2.41's refusals that mean the inputs, not the server, are at fault.
_INPUT_FAULTS = ("unexpected inference input", "data-type", "datatype", "shape", "expected", "batch-size", "missing")


def _module(protocol: str) -> Any:
    try:
        return _MODULES[protocol]
    except KeyError:
        raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}") from None


def _expected_inputs(server: TritonServer, model: str) -> str:
    try:
        cfg = server.model_config(model)
    except Exception:
        return "unknown"
    batch = "[batch] + " if cfg.get("max_batch_size", 0) > 0 else ""
    return ", ".join(
        f"{i['name']} {i['data_type'].removeprefix('TYPE_')} {batch}{[int(d) for d in i['dims']]}" for i in cfg.get("input", [])
    )


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


def translate(exc: InferenceServerException, server: TritonServer, model: str, tensors: list) -> InferenceError:
    """The labkit error for a refused request; ``tensors`` are what was sent."""
    sent = ", ".join(f"{t.name()} {t.datatype()} {t.shape()}" for t in tensors)
    text = exc.message() or str(exc)
    if "unknown model" in text or "is not found" in text:
        try:
            loaded = ", ".join(server.loaded_models()) or "none"
        except Exception:
            loaded = "unknown"
        return ModelNotFoundError(f"Model {model!r} is not loaded (loaded: {loaded}). Load it with server.load({model!r}).")
    if server.gone(within_s=0.5 if "unavailable" in text.lower() or "connect" in text.lower() else 0.0):
        return server.exited_error(f"The request to {model!r} failed")
    if any(p in text for p in _INPUT_FAULTS):
        return RequestError(
            f"Triton rejected the request to {model!r}: {text}\n"
            f"  the model expects: {_expected_inputs(server, model)}\n"
            f"  the request sent:  {sent}\n"
            f"(full config: server.model_config({model!r}))"
        )
    return InferenceError(f"The request to {model!r} failed: {text}")


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
    except InferenceServerException as exc:
        raise translate(exc, server, model, tensors) from None
    except CONNECTION_ERRORS:
        if server.gone():
            raise server.exited_error(f"The request to {model!r} failed") from None
        raise
    finally:
        server.track_request(model, -1)


def _output_meta(result: Any, protocol: str) -> list[dict]:
    if protocol == "http":
        return result.get_response()["outputs"]
    return [{"name": o.name} for o in result.get_response().outputs]


@dataclass
class AddSubResult:
    """One add_sub round trip: what was sent, what came back, and whether it was right."""

    model: str
    protocol: str
    input0: np.ndarray
    input1: np.ndarray
    output0: np.ndarray
    output1: np.ndarray
    ok: bool = field(init=False)

    def __post_init__(self) -> None:
        self.ok = bool(
            np.allclose(self.output0, self.input0 + self.input1) and np.allclose(self.output1, self.input0 - self.input1)
        )

    def summary(self) -> str:
        verdict = "ok" if self.ok else "WRONG"
        return (
            f"{self.model} over {self.protocol}: {verdict}\n"
            f"  INPUT0  = {self.input0.tolist()}\n  INPUT1  = {self.input1.tolist()}\n"
            f"  OUTPUT0 = {self.output0.tolist()} (sum)\n  OUTPUT1 = {self.output1.tolist()} (difference)"
        )

    def __repr__(self) -> str:
        return self.summary()


def check_add_sub(
    server: TritonServer,
    model: str = "add_sub",
    protocol: str = "http",
    *,
    batch: int | None = None,
    check: bool = True,
    client: Any = None,
) -> AddSubResult:
    """Send fixed FP32 inputs to an add_sub model; with ``check`` a wrong answer raises AnswerMismatchError.

    ``batch`` sends shape [batch, 4] (for add_sub_batching); default is [4].
    """
    base0 = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    base1 = np.array([0.5, 0.25, 2.0, 8.0], dtype=np.float32)
    if batch is not None:
        base0 = np.stack([base0 + i for i in range(batch)])
        base1 = np.stack([base1] * batch)
    out = infer(server, model, {"INPUT0": base0, "INPUT1": base1}, ["OUTPUT0", "OUTPUT1"], protocol=protocol, client=client)
    result = AddSubResult(model, protocol, base0, base1, out["OUTPUT0"], out["OUTPUT1"])
    if check and not result.ok:
        raise AnswerMismatchError(f"{model} answered wrongly:\n{result.summary()}\nCheck execute() in its model.py.")
    return result


@dataclass
class PassthroughResult:
    """Requests to a passthrough model (minimal, recommended, custom): did each get its input back?"""

    model: str
    protocol: str
    requests: int
    ok: bool

    def __repr__(self) -> str:
        return f"{self.model} over {self.protocol}: {self.requests} request(s), {'ok' if self.ok else 'WRONG'}"


def check_passthrough(
    server: TritonServer,
    model: str,
    protocol: str = "http",
    *,
    concurrent: int = 1,
    check: bool = True,
) -> PassthroughResult:
    """Send ``concurrent`` requests at once (one client each) to a reference passthrough model and
    check every answer equals its input. Two at once to a batching model lets Triton batch them."""
    import threading

    from . import reference

    config = server.model_config(model)
    # A passthrough returns input k as output k.
    pairs = dict(zip((i["name"] for i in config.get("input", [])), (o["name"] for o in config.get("output", []))))
    barrier = threading.Barrier(concurrent)
    answers: list[bool] = []
    failures: list[BaseException] = []

    def one(index: int) -> None:
        client = server.client(protocol)
        try:
            inputs = {k: v + index for k, v in reference.sample_inputs(model, server=server).items()}
            barrier.wait(timeout=30)
            out = infer(server, model, inputs, [pairs[k] for k in inputs], protocol=protocol, client=client)
            answers.append(all(np.array_equal(out[pairs[k]], v) for k, v in inputs.items()))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(concurrent)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    result = PassthroughResult(model, protocol, concurrent, len(answers) == concurrent and all(answers))
    if check and not result.ok:
        raise AnswerMismatchError(f"{model} did not return its input unchanged ({result}).")
    return result


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
    import queue

    answers: "queue.Queue[tuple[Any, Any]]" = queue.Queue()
    client = server.client("grpc")
    tensors, wanted = prepare("grpc", inputs, outputs)
    collected: list[dict[str, np.ndarray]] = []
    server.track_request(model, 1)
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        client.async_stream_infer(model, tensors, outputs=wanted, enable_empty_final_response=True)
        while True:
            try:
                result, error = answers.get(timeout=timeout_s)
            except queue.Empty:
                if server.gone(within_s=0.0):
                    raise server.exited_error(f"The stream to {model!r} broke off") from None
                raise InferenceError(
                    f"{model!r} sent {len(collected)} response(s), then nothing for {timeout_s:.0f} s and no final "
                    f"flag. A decoupled model must end every request with "
                    f"send(flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL); raise timeout_s if it is just slow."
                ) from None
            if error is not None:
                raise translate(error, server, model, tensors)
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
