"""Requests that must share one ``execute``: a copy of the person's Python model whose batch runs exactly
when every row of a round is there, and the round's requests sent at the same moment over gRPC (whose
status codes carry Triton's error codes; in 23.12 HTTP answers 400 for every error a model returns).

Used by the checks of notebook 01, which judge what a model answers to each request of a batch.
"""

from __future__ import annotations

import threading

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from ...repository import ModelConfig
from ...server.base import TritonServer
from .core import NotYet
from .scratch import config_of

REQUEST_TIMEOUT_S = 30
#: A request's answer: ("ok", {output name: array}) or ("error", Triton's status code name, message).
Outcome = tuple


def batched_copy(server: TritonServer, model: str, rows: int) -> tuple[ModelConfig, dict[str, str]]:
    """The config and model.py of a check's copy of ``model``: one instance, whose batch is full (and
    runs) exactly when ``rows`` rows are there, with time enough for a round's requests to arrive."""
    source = server.repository.model_dir(model) / "1" / "model.py"
    if not source.exists():
        raise NotYet(
            f"model {model!r} has no model.py yet.", f"run the `%%triton_python {model}` cell first.", rule="setup"
        )
    config = config_of(server, model, f"the cell that writes the config of {model}")
    config.max_batch_size = rows
    config.dynamic_batching.max_queue_delay_microseconds = 5_000_000
    del config.dynamic_batching.preferred_batch_size[:]
    del config.instance_group[1:]
    if not config.instance_group:
        config.instance_group.add()
    config.instance_group[0].count = 1
    return config, {"1/model.py": source.read_text()}


def send_together(server: TritonServer, model: str, sent: list[dict[str, np.ndarray]]) -> list[Outcome]:
    """Send each request of ``sent`` (its inputs by name) at the same moment over gRPC, one client and
    thread each; the outcome of each, in the order sent."""
    barrier = threading.Barrier(len(sent))
    outcomes: list[Outcome] = [("error", "NOT_SENT", "the request was not sent")] * len(sent)

    def one(index: int) -> None:
        client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
        try:
            tensors = []
            for name, array in sent[index].items():
                tensor = grpcclient.InferInput(name, list(array.shape), "FP32")
                tensor.set_data_from_numpy(array)
                tensors.append(tensor)
            barrier.wait(timeout=30)
            result = client.infer(model, tensors, client_timeout=REQUEST_TIMEOUT_S)
            names = [output.name for output in result.get_response().outputs]
            outcomes[index] = ("ok", {name: result.as_numpy(name) for name in names})
        except InferenceServerException as exc:
            outcomes[index] = ("error", str(exc.status() or "").removeprefix("StatusCode."), exc.message() or str(exc))
        except threading.BrokenBarrierError:
            pass
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(i,), name=f"labkit-together-{i}") for i in range(len(sent))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]
