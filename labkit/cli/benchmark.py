"""`labkit bench`: the lab's latency and overhead targets, measured on this machine, printed as numbers."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..client.inference import infer
from ..course import reference
from ..course.checks import check_add_sub
from ..course.lessons import real_models
from ..errors import LoadTimeoutError, RequestTimeoutError, ServerNotRunningError, UnstableMeasurementError
from ..native import deploy, reference_source
from ..observe.dashboard import Dashboard
from ..observe.perf_analyzer import perf
from ..repository import model_config
from ..server import EmbeddedServer
from ..server.base import TritonServer
from ..server.launchers.embedded import EmbeddedRuntime
from ..traffic.generator import run_load
from .options import server_for, with_server

_RELOAD_ROUNDS = 5
_COLD_ROUNDS = 3
_RATIO_ROUNDS = 3
_OVERHEAD_ROUNDS = 5
_RATIO_SECONDS = 3.0
_ADD_SUB_INPUTS = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}


#: What a benchmark starts its servers with (an unstarted server each call): EmbeddedServer by default,
#: containers for `labkit bench --server docker`.
Factory = Callable[[], TritonServer]


def _server_with(factory: Factory, *models: str) -> TritonServer:
    server = factory().start()
    try:
        reference.serve(server, models)
    except BaseException:
        server.stop()
        raise
    return server


def cold_start_s(factory: Factory) -> float:
    """Launch to READY with add_sub loaded and answering, median of a few launches."""
    times = []
    for _ in range(_COLD_ROUNDS):
        t0 = time.perf_counter()
        with _server_with(factory, "add_sub") as server:
            check_add_sub(server)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def python_reload_s(factory: Factory) -> float:
    """Edit model.py -> reloaded -> first correct answer from the new code; median of several edits."""
    source = reference.add_sub_source()
    if "a + b" not in source:
        raise RuntimeError("the reference add_sub model.py changed; update the benchmark's edit")
    times = []
    with _server_with(factory, "add_sub") as server:
        for round_ in range(1, _RELOAD_ROUNDS + 1):
            edited = source.replace("a + b", f"a + b + {round_}")
            t0 = time.perf_counter()
            server.python_model("add_sub", edited)
            result = check_add_sub(server, check=False)
            times.append(time.perf_counter() - t0)
            if not (result.output0 == result.input0 + result.input1 + round_).all():
                raise RuntimeError(f"reload round {round_}: the old code answered")
    return statistics.median(times)


def cpp_rebuild_reload_s(factory: Factory) -> float:
    """Edit the minimal backend's source -> compiled -> loaded at a new path -> the new code answers;
    median of several edits, each a real compile (every edit changes the source)."""
    source = reference_source("minimal").read_text()
    hook = "// (edit here: change `in` before it is sent back)"
    if hook not in source:
        raise RuntimeError("the minimal reference backend lost its edit-here comment; update the benchmark")
    times = []
    with _server_with(factory, "minimal_nonbatching") as server:
        x = reference.sample_inputs("minimal_nonbatching")["IN0"]
        for round_ in range(1, _RELOAD_ROUNDS + 1):
            # the nonce keeps the build cache from answering for an edit an earlier run already compiled
            edit = f"for (size_t k = 0; k < in.count<int32_t>(); ++k) in.data<int32_t>()[k] += {round_};  // {time.time_ns()}"
            t0 = time.perf_counter()
            server.cpp_backend("minimal", source.replace(hook, edit), ["minimal_nonbatching"], progress=False)
            out = infer(server, "minimal_nonbatching", {"IN0": x})["OUT0"]
            times.append(time.perf_counter() - t0)
            if not (out == x + round_).all():
                raise RuntimeError(f"rebuild round {round_}: the old code answered")
    return statistics.median(times)


def cpp_first_build_s(factory: Factory) -> float:
    """The minimal backend with an empty build cache (labkit's helper layer compiled too) -> loaded ->
    answering. A define no source reads makes every digest new, so nothing comes from the cache."""
    server = factory().start()
    try:
        server.repository.copy_model_from(reference.repository(), "minimal_nonbatching")
        x = reference.sample_inputs("minimal_nonbatching")["IN0"]
        t0 = time.perf_counter()
        build = server.models.build(
            "minimal",
            reference_source("minimal"),
            extra_flags=[f"-DLABKIT_COLD_BUILD={time.time_ns()}"],
            progress=False,
        )
        deploy.install(server.models, build, "minimal_nonbatching")
        out = infer(server, "minimal_nonbatching", {"IN0": x})["OUT0"]
        seconds = time.perf_counter() - t0
        shutil.rmtree(build.library.parent, ignore_errors=True)  # a build no one will ask for again
    finally:
        server.stop()
    if not (out == x).all():
        raise RuntimeError("first build: the backend answered wrongly")
    return seconds


def crash_and_restart(factory: Factory) -> dict[str, float]:
    """crash_detect_s: server killed -> labkit knows (its watchdog, and any call raises);
    restart_reload_s: restart() -> every model that was loaded serving again. Median of 3."""
    detect, restart = [], []
    models = ("add_sub", "add_sub_batching", "minimal_batching")
    server = _server_with(factory, *models)
    if not isinstance(server, EmbeddedServer):
        server.stop()
        print("crash_and_restart: measured on the embedded server only (it kills the server process)")
        return {}
    try:
        for _ in range(3):
            t0 = time.perf_counter()
            pid = server.runtime.triton_pid
            if pid is None:  # started (or restarted) above, so Triton has a process unless it already ended
                raise ServerNotRunningError(
                    doing="crash_and_restart",
                    reason="the server has no Triton process to kill",
                    remedy="run it against a server labkit started (embedded)",
                )
            os.kill(pid, signal.SIGKILL)  # what a crashing backend does to the server
            while server.health.died is None:
                time.sleep(0.005)
            detect.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            server.restart()
            check_add_sub(server)
            restart.append(time.perf_counter() - t0)
    finally:
        server.stop()
    return {"crash_detect_s": statistics.median(detect), "restart_reload_s": statistics.median(restart)}


_STUCK_INIT = """import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(100000)
"""
_STUCK_EXECUTE = """import time


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(100000)
"""
_STUCK_CPP_INIT = """#include <unistd.h>
#include "labkit/backend.hpp"
struct Stuck : labkit::ModelState {
  explicit Stuck(TRITONBACKEND_Model* model) : labkit::ModelState(model) { while (true) sleep(1); }
};
LABKIT_MODEL_STATE(Stuck)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch&) {});
}
"""


def _get_stuck(server: TritonServer) -> None:
    """A Python initialize past its load time limit (labkit ends it), a Python request stuck in
    execute, and a C++ ModelInitialize that never returns (a Triton thread nothing can end)."""
    server.config = server.config.with_(load_timeout_s=1.0)
    for name, backend in (("stuck_init", "python"), ("stuck_execute", "python"), ("stuck_cpp", "stuck_cpp")):
        server.repository.write_config(model_config(name, backend, [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])]))
    for call in (
        lambda: server.python_model("stuck_init", _STUCK_INIT),
        lambda: server.cpp_backend("stuck_cpp", _STUCK_CPP_INIT, ["stuck_cpp"], progress=False),
    ):
        try:
            call()
        except LoadTimeoutError:
            pass
    server.python_model("stuck_execute", _STUCK_EXECUTE)
    try:
        infer(server, "stuck_execute", {"IN0": np.zeros(4, np.float32)}, timeout_s=1.0)
    except RequestTimeoutError:
        pass


def stop_times(factory: Factory) -> dict[str, float]:
    """stop_s: stop() of a server serving add_sub (its model finalizes first); stop_after_hang_s: stop()
    after the loads and the request of _get_stuck. Median of 3 each."""
    plain, stuck = [], []
    for _ in range(3):
        server = _server_with(factory, "add_sub")
        check_add_sub(server)
        t0 = time.perf_counter()
        server.stop()
        plain.append(time.perf_counter() - t0)
        server = _server_with(factory, "add_sub")
        try:
            _get_stuck(server)
        finally:
            t0 = time.perf_counter()
            server.stop()
            stuck.append(time.perf_counter() - t0)
    return {"stop_s": statistics.median(plain), "stop_after_hang_s": statistics.median(stuck)}


REFERENCE_MODELS = (
    "add_sub",
    "add_sub_batching",
    "minimal_nonbatching",
    "minimal_batching",
    "recommended_batching",
    "custom_passthrough",
)


def memory(factory: Factory) -> dict[str, float]:
    """server_rss_mb: server plus Python stubs with every reference model loaded, after warm-up;
    soak_rss_growth: resident memory after 20,000 more requests across them, over before."""
    server = _server_with(factory, *REFERENCE_MODELS)
    try:
        if not isinstance(server, EmbeddedServer) or not isinstance(server.runtime, EmbeddedRuntime):
            print("memory: measured on the embedded server only (it reads the processes' memory)")
            return {}
        runtime = server.runtime

        def spread(total: int) -> None:
            for model in REFERENCE_MODELS:
                # 8 clients fill a batch of 8 at once: the 50 ms queue delays of minimal/recommended never bite
                run_load(
                    server,
                    model,
                    reference.sample_inputs(model),
                    requests=total // len(REFERENCE_MODELS),
                    concurrency=8,
                )

        spread(3000)  # warm-up: allocators and caches reach their working size
        before = runtime.rss_bytes()
        spread(20_000)
        after = runtime.rss_bytes()
    finally:
        server.stop()
    return {"server_rss_mb": before / 2**20, "soak_rss_growth": after / before}


def perf_analyzer_ratio(factory: Factory) -> dict[str, float]:
    """labkit's load generator (run_load, HTTP) over perf_analyzer 23.12 (HTTP, its defaults) on the same
    server, model and concurrency: add_sub and add_sub_batching at c=1 and c=8. Rounds interleave the
    two, best of each (the server drifts between rounds on a small machine)."""
    out: dict[str, float] = {}
    with _server_with(factory, "add_sub", "add_sub_batching") as server:
        for model in ("add_sub", "add_sub_batching"):
            inputs = reference.sample_inputs(model)
            run_load(server, model, inputs, requests=500, concurrency=8)  # warm-up
            for c in (1, 8):
                ours = theirs = 0.0
                for _ in range(_RATIO_ROUNDS):
                    try:
                        sweep = perf(
                            server, model, concurrency=[c], measurement_ms=1500, stability_percent=20, progress=False
                        )
                        theirs = max(theirs, sweep.steps[0].throughput)
                    except UnstableMeasurementError:
                        pass  # a busy moment; the other rounds count
                    ours = max(
                        ours,
                        run_load(
                            server, model, inputs, requests=10**9, concurrency=c, duration_s=_RATIO_SECONDS
                        ).throughput,
                    )
                if not theirs:
                    raise UnstableMeasurementError(
                        model=model,
                        at=f"c={c}",
                        problem="found no stable measurement",
                        remedy="run the benchmark again when the machine is quieter",
                    )
                out[f"{model}_c{c}_labkit_rps"] = round(ours, 1)
                out[f"{model}_c{c}_perf_analyzer_rps"] = round(theirs, 1)
                out[f"{model}_c{c}_ratio"] = round(ours / theirs, 3)
    return out


def dashboard_overhead(factory: Factory) -> dict[str, float]:
    """throughput_ratio: add_sub_batching throughput at c=8 with the live dashboard polling and
    redrawing at its defaults, over throughput without; redraws_per_s: frames it drew meanwhile.
    Runs of a few seconds, median of 5 interleaved pairs whose order alternates (a machine that speeds up
    or slows down during the rounds favours neither side), after a warm-up with a dashboard (its drawing
    process starts once per kernel; that start is not what each dashboard costs)."""
    batch = {k: v[None, :] for k, v in _ADD_SUB_INPUTS.items()}
    with _server_with(factory, "add_sub_batching") as server:

        def load() -> Any:
            return run_load(server, "add_sub_batching", batch, requests=10**9, concurrency=8, duration_s=_RATIO_SECONDS)

        with Dashboard(server, "add_sub_batching"):
            load()  # warm-up

        def watched() -> tuple[Any, Dashboard]:
            with Dashboard(server, "add_sub_batching") as dash:
                return load(), dash

        ratios, rates = [], []
        for round_ in range(_OVERHEAD_ROUNDS):
            if round_ % 2:
                (with_dash, dash), without = watched(), load().throughput
            else:
                without, (with_dash, dash) = load().throughput, watched()
            ratios.append(with_dash.throughput / without)
            rates.append(dash.frames / with_dash.duration_s)
    return {"throughput_ratio": statistics.median(ratios), "redraws_per_s": statistics.median(rates)}


def real_models_bench(factory: Factory) -> dict[str, float]:
    """The real models through Triton against onnxruntime alone (labkit.lessons.real_models.measure), on the
    embedded server only (labkit builds the models' environments for its stub)."""
    server = factory()
    if not isinstance(server, EmbeddedServer):
        print("real_models: measured on the embedded server only (labkit builds the models' environments for it)")
        return {}
    with server.start():
        envs = real_models.serve(server, ("ocr_rec", "vad"), progress=None)
        return real_models.measure(server, envs, rounds=_RATIO_ROUNDS, seconds=_RATIO_SECONDS)


BENCHMARKS: dict[str, Callable[[Factory], Any]] = {
    "cold_start_s": cold_start_s,
    "python_reload_s": python_reload_s,
    "cpp_rebuild_reload_s": cpp_rebuild_reload_s,
    "cpp_first_build_s": cpp_first_build_s,
    "perf_analyzer_ratio": perf_analyzer_ratio,
    "crash_and_restart": crash_and_restart,
    "memory": memory,
    "dashboard_overhead": dashboard_overhead,
    "stop_times": stop_times,
    "real_models": real_models_bench,
}
# name -> (target, "<" or ">"): what "met" means for each number
TARGETS: dict[str, tuple[float, str]] = {
    "cold_start_s": (3.0, "<"),
    "python_reload_s": (0.5, "<"),
    "cpp_rebuild_reload_s": (1.5, "<"),
    **{f"perf_analyzer_ratio.{m}_c{c}_ratio": (0.9, ">") for m in ("add_sub", "add_sub_batching") for c in (1, 8)},
    "dashboard_overhead.throughput_ratio": (0.97, ">"),
    "dashboard_overhead.redraws_per_s": (0.9, ">"),  # "at least once a second", less the last partial second
    "crash_and_restart.crash_detect_s": (2.0, "<"),
    "crash_and_restart.restart_reload_s": (5.0, "<"),
    "memory.server_rss_mb": (600.0, "<"),
    "memory.soak_rss_growth": (1.05, "<"),
    "stop_times.stop_s": (3.0, "<"),
    "stop_times.stop_after_hang_s": (3.0, "<"),
    "real_models.ocr_batch8_ratio": (0.9, ">"),
}


def _verdict(name: str, value: float) -> str:
    if name not in TARGETS:
        return ""
    target, sense = TARGETS[name]
    met = value < target if sense == "<" else value >= target
    return f"  (target {sense} {target}: {'met' if met else 'MISSED'})"


def run(only: list[str] | None = None, factory: Factory = EmbeddedServer) -> dict[str, Any]:
    """Run the benchmarks (or ``only`` some), printing each number as it comes; ``factory`` makes
    the (unstarted) servers, embedded by default."""
    results: dict[str, Any] = {}
    for name, fn in BENCHMARKS.items():
        if only and name not in only:
            continue
        value = fn(factory)
        if isinstance(value, dict):
            results[name] = value
            for key, v in value.items():
                print(f"{name}.{key:36s} {v:10.3f}{_verdict(f'{name}.{key}', v)}", flush=True)
        else:
            results[name] = round(value, 4)
            print(f"{name:37s} {value:10.3f}{_verdict(name, value)}", flush=True)
    return results


def _bench(args: argparse.Namespace) -> int:
    results = run(args.only, lambda: server_for(args))
    results = {"server": args.server, **results}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit bench` to labkit's parser."""
    bench = with_server(sub.add_parser("bench", help="measure start, reload, build and load-generation figures"))
    bench.add_argument("--json", metavar="PATH")
    bench.add_argument("--only", action="append", help="run only this benchmark (repeatable)")
    bench.set_defaults(func=_bench)
