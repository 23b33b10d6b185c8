"""The demo tour: the sections `labkit demo` runs against a server and reports as JSON."""

from __future__ import annotations

from typing import Any

from . import reference_repository
from .errors import LabkitError
from .requests import check_add_sub
from .server.base import TritonServer

PYTHON_MODELS = ("add_sub", "add_sub_batching")


def add_sub_section(server: TritonServer) -> dict[str, Any]:
    """add_sub over HTTP and gRPC, and add_sub_batching with a batch of 2."""
    section: dict[str, Any] = {"ok": False}
    try:
        for model in PYTHON_MODELS:
            server.repository.copy_model_from(reference_repository(), model)
            server.load(model)
        http = check_add_sub(server, protocol="http")
        grpc = check_add_sub(server, protocol="grpc")
        batched = check_add_sub(server, "add_sub_batching", batch=2)
        section.update(
            ok=http.ok and grpc.ok and batched.ok,
            http=http.ok,
            grpc=grpc.ok,
            batching_model=batched.ok,
            output0=http.output0.tolist(),
            output1=http.output1.tolist(),
        )
    except LabkitError as exc:
        section["error"] = str(exc)
    return section


SECTIONS = {"add_sub": add_sub_section}


def run(server: TritonServer) -> dict[str, Any]:
    report: dict[str, Any] = {"server": server.kind, "server_version": server.version}
    for name, section in SECTIONS.items():
        report[name] = section(server)
    report["ok"] = all(v.get("ok") for v in report.values() if isinstance(v, dict))
    return report


def summary(report: dict[str, Any]) -> str:
    lines = [f"Triton {report['server_version']} ({report['server']})"]
    for name, value in report.items():
        if isinstance(value, dict):
            mark = "ok  " if value.get("ok") else "FAIL"
            detail = value.get("error") or ", ".join(f"{k}={v}" for k, v in value.items() if k != "ok" and not isinstance(v, list))
            lines.append(f"  [{mark}] {name}: {detail}")
    lines.append("all checks passed" if report["ok"] else "SOME CHECKS FAILED")
    return "\n".join(lines)
