"""The demo tour: the sections `labkit demo` runs against a server and reports as JSON.

A section is a function (server, out_dir) -> dict with "ok"; ``run_sections`` runs a set of them so
that one failing section reports its error and the others still run. The ``api_tour`` section is
itself such a set: one item per lesson module (labkit.course.lessons), each through the same ``run(server)``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import LabkitError
from ..observe import plots
from ..observe.stats import StatsCollector, model_stats
from ..observe.timelines import plot_timelines, timeline
from ..server.base import TritonServer
from ..traffic.generator import run_load
from . import reference
from .checks import check_add_sub, check_passthrough
from .lessons import (
    artifacts,
    auto_complete,
    backend_attributes,
    bls,
    bls_decoupled,
    bls_stateful,
    cancellation,
    decoupled,
    decoupled_cpp,
    instances,
    model_loading,
    python_logging,
    request_parameters,
    rescheduling,
    response_parameters,
    stateful,
    volume_batching,
)

Section = Callable[[TritonServer, Path | None], dict[str, Any]]
#: Every lesson module that labkit.course.lessons lists, in its order (the C++ ones compile with the real compiler).
LESSONS: tuple[ModuleType, ...] = (
    volume_batching,
    bls,
    decoupled,
    response_parameters,
    artifacts,
    auto_complete,
    stateful,
    instances,
    decoupled_cpp,
    cancellation,
    model_loading,
    bls_decoupled,
    bls_stateful,
    rescheduling,
    request_parameters,
    python_logging,
    backend_attributes,
)


def run_sections(server: TritonServer, sections: dict[str, Section], out_dir: Path | None) -> dict[str, Any]:
    """Run each section; one that fails reports its error instead of stopping the others."""
    report: dict[str, Any] = {}
    for name, section in sections.items():
        try:
            report[name] = section(server, out_dir)
        except LabkitError as exc:
            report[name] = {"ok": False, "error": str(exc)}
    report["ok"] = all(r.get("ok") for r in report.values())
    return report


def _lesson(module: ModuleType) -> Section:
    name = module.__name__.rsplit(".", 1)[-1]

    def section(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
        outcome = module.run(server)
        row: dict[str, Any] = {"ok": outcome.ok, **outcome.record}
        if out_dir is not None and outcome.figure is not None:
            row["plot"] = str(plots.save(outcome.figure, out_dir / f"api_tour_{name}.png"))
        return row

    return section


def api_tour_section(server: TritonServer, out_dir: Path | None = None) -> dict[str, Any]:
    """Every backend-API lesson run once (labkit.course.lessons), ok per lesson."""
    return run_sections(server, {m.__name__.rsplit(".", 1)[-1]: _lesson(m) for m in LESSONS}, out_dir)


def add_sub_section(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    """add_sub over HTTP and gRPC, and add_sub_batching with a batch of 2."""
    reference.serve(server, ["add_sub", "add_sub_batching"])
    http = check_add_sub(server, protocol="http")
    grpc = check_add_sub(server, protocol="grpc")
    batched = check_add_sub(server, "add_sub_batching", batch=2)
    return {
        "ok": http.ok and grpc.ok and batched.ok,
        "http": http.ok,
        "grpc": grpc.ok,
        "batching_model": batched.ok,
        "output0": http.output0.tolist(),
        "output1": http.output1.tolist(),
    }


def _cpp_section(models: list[str]) -> Section:
    """Build the backend, serve its models, check answers over HTTP and gRPC; for a batching model
    send two requests at once and report the largest batch Triton formed (2 when they met)."""

    def section(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
        reference.serve(server, models)
        result: dict[str, Any] = {}
        for model in models:
            ok = all(check_passthrough(server, model, p).ok for p in ("http", "grpc"))
            row: dict[str, Any] = {"ok": ok}
            if server.repository.read_config(model).max_batch_size > 0:
                before = model_stats(server, model, settle=True)
                ok = check_passthrough(server, model, concurrent=2).ok and ok
                row["largest_batch"] = model_stats(server, model, settle=True).since(before).max_batch_size_seen
                row["ok"] = ok
            result[model] = row
        result["ok"] = all(r["ok"] for r in result.values())
        return result

    return section


BATCHING_MODELS = ("minimal_batching", "add_sub_batching")


def batching_section(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    """Average batch size at concurrency 1 and 8 for the batching models; dashboards saved as PNG."""
    section: dict[str, Any] = {}
    for model in BATCHING_MODELS:
        if model not in server.loaded_models():
            reference.serve(server, [model])
        inputs = reference.sample_inputs(model)
        row: dict[str, Any] = {}
        for concurrency, requests in ((1, 100), (8, 800)):  # one client waits out the queue delay each time
            with StatsCollector(server, [model], interval_s=0.05) as col:
                result = run_load(server, model, inputs, requests=requests, concurrency=concurrency)
            total = col.total(model)
            row[f"c{concurrency}_average_batch"] = round(total.average_batch_size, 2)
            row[f"c{concurrency}_throughput_rps"] = round(result.throughput, 1)
            row[f"c{concurrency}_errors"] = len(result.errors)
            if out_dir is not None:
                fig = plots.dashboard_figure(plots.DashboardData.collect(col, model, result))
                row[f"c{concurrency}_plot"] = str(plots.save(fig, out_dir / f"{model}_c{concurrency}.png"))
        section[model] = row
    section["ok"] = all(
        r["c1_errors"] == r["c8_errors"] == 0 and r["c8_average_batch"] > r["c1_average_batch"]
        for k, r in section.items()
        if isinstance(r, dict)
    )
    return section


def timeline_section(server: TritonServer, out_dir: Path | None) -> dict[str, Any]:
    """minimal_batching seen through Triton's traces: two concurrent requests (one execution of batch 2,
    the first having waited for the second) and 96 requests from 8 clients; counts checked against
    Triton's statistics. Both drawn into timeline.png."""
    model = "minimal_batching"
    if model not in server.loaded_models():
        reference.serve(server, [model])
    with timeline(server, model) as pair:
        check_passthrough(server, model, concurrent=2)
    with timeline(server, model, last=48) as busy:
        run_load(server, model, reference.sample_inputs(model), requests=96, concurrency=8)
    section: dict[str, Any] = {"two_requests": pair.summary(), "concurrency_8": busy.summary()}
    section["ok"] = (
        pair.counts()["executions"] == 1
        and pair.counts()["largest_batch"] == 2
        and pair.agrees_with_statistics()
        and busy.agrees_with_statistics()
    )
    if out_dir is not None:
        section["plot"] = str(
            plot_timelines([pair, busy], "minimal_batching timelines", same_time_axis=False).save(
                out_dir / "timeline.png"
            )
        )
    return section


SECTIONS: dict[str, Section] = {
    "add_sub": add_sub_section,
    "minimal": _cpp_section(["minimal_nonbatching", "minimal_batching"]),
    "recommended": _cpp_section(["recommended_batching"]),
    "custom": _cpp_section(["custom_passthrough"]),
    "batching": batching_section,
    "timeline": timeline_section,
    "api_tour": api_tour_section,
}


def run(server: TritonServer, out_dir: Path | None = None, only: list[str] | None = None) -> dict[str, Any]:
    """Run every section (or ``only`` some); a section that fails reports its error instead of stopping the tour."""
    chosen = {name: section for name, section in SECTIONS.items() if not only or name in only}
    return {"server": server.runtime.kind, "server_version": server.version, **run_sections(server, chosen, out_dir)}


def _flat(value: dict[str, Any], prefix: str = "") -> list[str]:
    parts = []
    for key, v in value.items():
        if key in ("ok", "plot") or isinstance(v, list) or key.endswith("_plot"):
            continue
        parts.extend(_flat(v, f"{prefix}{key}.") if isinstance(v, dict) else [f"{prefix}{key}={v}"])
    return parts


def summary(report: dict[str, Any]) -> str:
    lines = [f"Triton {report['server_version']} ({report['server']})"]
    for name, value in report.items():
        if isinstance(value, dict):
            mark = "ok  " if value.get("ok") else "FAIL"
            lines.append(f"  [{mark}] {name}: {value.get('error') or ', '.join(_flat(value))}")
    lines.append("all checks passed" if report["ok"] else "SOME CHECKS FAILED")
    return "\n".join(lines)
