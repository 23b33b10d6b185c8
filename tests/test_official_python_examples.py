"""Triton's own python_backend r23.12 examples, taken unchanged from the pinned archive (each model.py
served as ``1/model.py`` beside its config.pbtxt, under the model names its README and client use),
served by the embedded 2.41 server on Triton's default ports, and checked by their official client
scripts, also unchanged (they hard-code localhost:8000, localhost:8001 for gRPC streams and
localhost:8002/metrics). The archive is read at test time (LABKIT_TRITON_SOURCES, as .ci/run sets it).

Not tested here, because they need what this environment lacks: ``pytorch`` (torch), ``instance_kind``
(torch and a ResNet-50 download; its point is KIND_GPU), ``jax`` (jax) and ``preprocessing``
(torchvision, a TensorRT plan and a GPU)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import labkit
import labkit.server
from labkit.course.reference import add_sub_source

# The bls example's README serves examples/pytorch as the model "pytorch", whose model.py needs
# PyTorch (not installed here). This stand-in has the same inputs and outputs (it is served with
# examples/pytorch/config.pbtxt, unchanged) and computes the same sum and difference.
PYTORCH_STAND_IN = add_sub_source()  # labkit's reference add_sub: INPUT0 + INPUT1, INPUT0 - INPUT1


@dataclass(frozen=True)
class Model:
    name: str  # as the client (and the example's README) asks for it
    model_py: str  # path under examples/
    config: str | None  # path under examples/; None: Triton asks model.py (auto-complete)
    stand_in: str | None = None  # a model.py of our own, when the official one cannot run here


@dataclass(frozen=True)
class Example:
    models: tuple[Model, ...]
    clients: tuple[tuple[str, str], ...]  # (client script under examples/, the line it prints on success)
    auto_complete: bool = False


ADD_SUB = Model("add_sub", "add_sub/model.py", "add_sub/config.pbtxt")
SQUARE = Model("square_int32", "decoupled/square_model.py", "decoupled/square_config.pbtxt")

CASES = {
    "add_sub": Example((ADD_SUB,), (("add_sub/client.py", "PASS: add_sub"),)),
    "decoupled": Example(
        (Model("repeat_int32", "decoupled/repeat_model.py", "decoupled/repeat_config.pbtxt"), SQUARE),
        (("decoupled/repeat_client.py", "PASS: repeat_int32"), ("decoupled/square_client.py", "PASS: square_int32")),
    ),
    "bls": Example(
        (
            ADD_SUB,
            Model("pytorch", "pytorch/model.py", "pytorch/config.pbtxt", stand_in=PYTORCH_STAND_IN),
            Model("bls_sync", "bls/sync_model.py", "bls/sync_config.pbtxt"),
            Model("bls_async", "bls/async_model.py", "bls/async_config.pbtxt"),
        ),
        (("bls/sync_client.py", "PASS: BLS Sync"), ("bls/async_client.py", "PASS: BLS Async")),
    ),
    "bls_decoupled": Example(
        (
            SQUARE,
            Model("bls_decoupled_sync", "bls_decoupled/sync_model.py", "bls_decoupled/sync_config.pbtxt"),
            Model("bls_decoupled_async", "bls_decoupled/async_model.py", "bls_decoupled/async_config.pbtxt"),
        ),
        (
            ("bls_decoupled/sync_client.py", "PASS: BLS Decoupled Sync"),
            ("bls_decoupled/async_client.py", "PASS: BLS Decoupled Async"),
        ),
    ),
    "custom_metrics": Example(
        (Model("custom_metrics", "custom_metrics/model.py", "custom_metrics/config.pbtxt"),),
        (("custom_metrics/client.py", "PASS: custom_metrics"),),
    ),
    "auto_complete": Example(
        (
            Model("nobatch_auto_complete", "auto_complete/nobatch_model.py", None),
            Model("batch_auto_complete", "auto_complete/batch_model.py", None),
        ),
        (("auto_complete/client.py", "PASS: auto_complete"),),
        auto_complete=True,
    ),
}


def _repository(examples: Path, example: Example, root: Path) -> Path:
    """A model repository laid out as the example's README says: NAME/config.pbtxt, NAME/1/model.py."""
    for model in example.models:
        version = root / model.name / "1"
        version.mkdir(parents=True)
        official = (examples / model.model_py).read_text()
        (version / "model.py").write_text(model.stand_in if model.stand_in is not None else official)
        if model.config is not None:
            (root / model.name / "config.pbtxt").write_bytes((examples / model.config).read_bytes())
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_official_python_example_passes_its_client(python_backend_examples, name, tmp_path, triton_default_ports):
    examples = python_backend_examples
    example = CASES[name]
    repository = _repository(examples, example, tmp_path / "models")
    # The clients hard-code Triton's default ports: a port another process holds fails this test
    # (PortTakenError), it is not skipped.
    with labkit.server.EmbeddedServer(
        repository=repository, http_port=8000, grpc_port=8001, metrics_port=8002, auto_complete=example.auto_complete
    ) as srv:
        srv.start()
        for model in example.models:
            srv.load(model.name)
        assert srv.loaded_models() == sorted(m.name for m in example.models)
        for client, success in example.clients:
            proc = subprocess.run(
                [sys.executable, str(examples / client)], cwd=tmp_path, capture_output=True, text=True, timeout=120
            )
            output = proc.stdout + proc.stderr
            assert proc.returncode == 0, f"{client} failed:\n{output}\n--- server log ---\n{srv.logs.tail()}"
            assert success in proc.stdout.splitlines(), output
            if client == "bls/sync_client.py":
                # its third request names a model that does not exist: the BLS call fails, and says so
                assert "undefined_model" in proc.stdout, output
