"""The `api_tour` section of `labkit demo`: each lesson run once against the server, ``ok`` per item."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import plots
from ..errors import LabkitError, ModelLoadError
from ..server.base import TritonServer
from . import artifacts, auto_complete, bls, decoupled, response_parameters, volume_batching


def _volume_batching(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    result = volume_batching.compare(server)
    row: dict[str, Any] = {
        "ok": result.ok,
        "limit_bytes": result.max_bytes,
        "largest_batch_capped": result.volume.max_batch_size_seen,
        "largest_batch_default": result.default.max_batch_size_seen,
    }
    if out_dir is not None:
        row["batches_plot"] = str(plots.save(result.figure(), out_dir / "api_tour_volume_batching.png"))
    return row


def _bls(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    bls.setup(server)
    result = bls.call(server)
    error = bls.missing_callee_error(server)
    named = bls.CALLEES[1] in error
    return {"ok": result.ok and named, "calls": result.calls, "missing_model_error": named}


def _decoupled(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    decoupled.setup(server)
    result = decoupled.repeat(server, [4, 8, 15, 16, 23, 42])
    return {"ok": result.ok, "responses": len(result.values), "in_order": result.ok}


def _response_parameters(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    response_parameters.setup(server)
    http, grpc = (response_parameters.ask(server, p) for p in ("http", "grpc"))
    return {"ok": http.ok and grpc.ok, "http": http.ok, "grpc": grpc.ok}


def _artifacts(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    try:
        artifacts.setup(server, scale=None)
        missing_error = False
    except ModelLoadError as exc:
        missing_error = artifacts.ARTIFACT in str(exc)
    artifacts.setup(server, scale=2.5)
    result = artifacts.scaled(server)
    return {"ok": result.ok and missing_error, "scale": result.scale, "missing_file_error": missing_error}


def _auto_complete(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    # A server of its own: the tour's server runs with auto-complete off, as labkit's always do.
    own = auto_complete.start_server()
    try:
        cpp = auto_complete.tensors(auto_complete.setup_cpp(own))
        py = auto_complete.tensors(auto_complete.setup_python(own))
    finally:
        own.stop()
    ok = all(c["inputs"] and c["outputs"] and c["max_batch_size"] > 0 for c in (cpp, py))
    return {"ok": ok, "cpp_max_batch_size": cpp["max_batch_size"], "python_max_batch_size": py["max_batch_size"]}


ITEMS: dict[str, Callable[[TritonServer, Path | None], dict[str, Any]]] = {
    "volume_batching": _volume_batching,
    "bls": _bls,
    "decoupled": _decoupled,
    "response_parameters": _response_parameters,
    "artifacts": _artifacts,
    "auto_complete": _auto_complete,
}


def api_tour_section(server: TritonServer, out_dir: Path | None = None) -> dict[str, Any]:
    """Run every lesson once; an item that fails reports its error and the others still run."""
    report: dict[str, Any] = {}
    for name, item in ITEMS.items():
        try:
            report[name] = item(server, out_dir)
        except LabkitError as exc:
            report[name] = {"ok": False, "error": str(exc).splitlines()[0]}
    report["ok"] = all(r["ok"] for r in report.values())
    return report
