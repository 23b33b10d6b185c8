"""Requests whose tensors travel through CUDA shared memory (``labkit.infer(..., shared_memory="cuda")``):
each input and output gets a device region made and read with tritonclient's own
``tritonclient.utils.cuda_shared_memory`` (it needs the ``cuda-python`` package: ``pip install
'labkit[gpu]'``), registered with the server for the one request and removed after it. Triton then
hands a backend its inputs, and asks for its outputs, in GPU memory."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from tritonclient.utils import (
    InferenceServerException,
    np_to_triton_dtype,
    triton_to_np_dtype,
)

from ..errors import ConfigError, GpuUnavailableError
from . import detect

KINDS = ("cuda",)


def _cudashm() -> Any:
    try:
        return importlib.import_module("tritonclient.utils.cuda_shared_memory")
    except (ImportError, RuntimeError):  # tritonclient raises RuntimeError when cuda-python is missing
        raise GpuUnavailableError(
            remedy="install it with `pip install 'labkit[gpu]'` (or `pip install 'tritonclient[cuda]'`); tritonclient's cuda_shared_memory uses it",
            missing="cuda-python",
            reason="not installed",
            wanted="CUDA shared memory",
        ) from None


def model_name(config: dict) -> str:
    return str(config.get("name", ""))


def output_shapes(config: dict, inputs: Mapping[str, np.ndarray], outputs: Sequence[str] | None) -> dict[str, tuple]:
    """Each output's shape and numpy dtype from the config (the batch size from the first input)."""
    batch = [len(next(iter(inputs.values())))] if config.get("max_batch_size", 0) else []
    shapes = {}
    for out in config.get("output", []):
        if outputs and out["name"] not in outputs:
            continue
        dims = [int(d) for d in out.get("dims", [])]
        datatype = out["data_type"].removeprefix("TYPE_").replace("STRING", "BYTES")
        if any(d < 0 for d in dims) or datatype == "BYTES":
            raise ConfigError(
                problem=f"({datatype} {dims}) has no size known before the request, which a CUDA shared-memory region needs",
                remedy="Send it without shared_memory",
                field="output",
                value=out["name"],
                source=model_name(config),
            )
        dtype = triton_to_np_dtype(datatype)
        shapes[out["name"]] = (tuple(batch + dims), dtype)
    return shapes


class _Server(Protocol):
    """What a request through CUDA shared memory needs of a server: the model's config and an HTTP client."""

    def model_config(self, name: str) -> dict: ...

    def client(self, protocol: str = "http") -> Any: ...


def infer(
    server: _Server,
    model: str,
    inputs: Mapping[str, Any],
    outputs: Sequence[str] | None,
    refusal: Callable[[Exception, list], Exception],
    device_id: int = 0,
) -> dict[str, np.ndarray]:
    """One HTTP request with every input and output in a CUDA shared-memory region on ``device_id``.
    GpuUnavailableError when no GPU is visible or cuda-python is missing; Triton's refusal becomes
    ``refusal(exc, tensors)`` (labkit.client.inference's translation); nothing is left registered."""
    detect.need("CUDA shared memory")
    cudashm = _cudashm()
    from tritonclient import http as httpclient

    arrays = {name: np.ascontiguousarray(value) for name, value in inputs.items()}
    shapes = output_shapes(server.model_config(model), arrays, outputs)
    prefix = f"labkit_{os.getpid()}_{model}_"
    client = server.client("http")
    handles: dict[str, Any] = {}
    try:
        tensors, wanted = [], []
        for name, array in arrays.items():
            region = f"{prefix}in_{name}"
            handles[region] = handle = cudashm.create_shared_memory_region(region, array.nbytes, device_id)
            cudashm.set_shared_memory_region(handle, [array])
            client.register_cuda_shared_memory(region, cudashm.get_raw_handle(handle), device_id, array.nbytes)
            tensor = httpclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_shared_memory(region, array.nbytes)
            tensors.append(tensor)
        for name, (shape, dtype) in shapes.items():
            region, size = f"{prefix}out_{name}", int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            handles[region] = handle = cudashm.create_shared_memory_region(region, size, device_id)
            client.register_cuda_shared_memory(region, cudashm.get_raw_handle(handle), device_id, size)
            requested = httpclient.InferRequestedOutput(name)
            requested.set_shared_memory(region, size)
            wanted.append(requested)
        try:
            client.infer(model, tensors, outputs=wanted)
        except InferenceServerException as exc:
            raise refusal(exc, tensors) from None
        return {
            name: cudashm.get_contents_as_numpy(handles[f"{prefix}out_{name}"], np_to_triton_dtype(dtype), list(shape))
            for name, (shape, dtype) in shapes.items()
        }
    except cudashm.CudaSharedMemoryException as exc:
        raise GpuUnavailableError(
            remedy=f"Check `nvidia-smi` and the device number (GPU {device_id} was asked for)",
            missing="CUDA device",
            reason=str(exc),
            wanted="CUDA shared memory",
        ) from None
    finally:
        for region, handle in handles.items():
            try:
                client.unregister_cuda_shared_memory(region)
            except InferenceServerException:
                pass  # never registered (its creation failed): nothing to undo on the server
            cudashm.destroy_shared_memory_region(handle)
        client.close()
