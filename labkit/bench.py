"""`labkit bench`: the lab's latency and overhead targets, measured on this machine, printed as numbers."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from . import reference
from .checks import check_add_sub
from .dashboard import Dashboard
from .inference import infer
from .load import run_load
from .native import deploy, reference_source
from .server import EmbeddedServer
from .server.base import TritonServer

_RELOAD_ROUNDS = 5
_COLD_ROUNDS = 3
_LOAD_REQUESTS = 2000
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
        build = server.build("minimal", reference_source("minimal"), extra_flags=[f"-DLABKIT_COLD_BUILD={time.time_ns()}"],
                             progress=False)
        deploy.install(server, build, "minimal_nonbatching")
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
            os.kill(server.pid, signal.SIGKILL)  # what a crashing backend does to the server
            while server.died is None:
                time.sleep(0.005)
            detect.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            server.restart()
            check_add_sub(server)
            restart.append(time.perf_counter() - t0)
    finally:
        server.stop()
    return {"crash_detect_s": statistics.median(detect), "restart_reload_s": statistics.median(restart)}


REFERENCE_MODELS = (
    "add_sub", "add_sub_batching", "minimal_nonbatching", "minimal_batching", "recommended_batching", "custom_passthrough",
)


def memory(factory: Factory) -> dict[str, float]:
    """server_rss_mb: server plus Python stubs with every reference model loaded, after warm-up;
    soak_rss_growth: resident memory after 20,000 more requests across them, over before."""
    server = _server_with(factory, *REFERENCE_MODELS)
    try:
        if not isinstance(server, EmbeddedServer):
            print("memory: measured on the embedded server only (it reads the processes' memory)")
            return {}

        def spread(total: int) -> None:
            for model in REFERENCE_MODELS:
                # 8 clients fill a batch of 8 at once: the 50 ms queue delays of minimal/recommended never bite
                run_load(server, model, reference.sample_inputs(model), requests=total // len(REFERENCE_MODELS), concurrency=8)

        spread(3000)  # warm-up: allocators and caches reach their working size
        before = server.rss_bytes()
        spread(20_000)
        after = server.rss_bytes()
    finally:
        server.stop()
    return {"server_rss_mb": before / 2**20, "soak_rss_growth": after / before}


def _plain_loop(server: TritonServer, concurrency: int, requests: int) -> float:
    """The baseline: bare tritonclient calls, one client per thread, prepared inputs reused."""

    def worker(n: int) -> None:
        client = httpclient.InferenceServerClient(server.http_url)
        tensors = []
        for name, value in _ADD_SUB_INPUTS.items():
            tensor = httpclient.InferInput(name, list(value.shape), "FP32")
            tensor.set_data_from_numpy(value)
            tensors.append(tensor)
        for _ in range(n):
            client.infer("add_sub", tensors)
        client.close()

    threads = [threading.Thread(target=worker, args=(requests // concurrency,)) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (requests // concurrency * concurrency) / (time.perf_counter() - t0)


def client_throughput(factory: Factory) -> dict[str, float]:
    """add_sub requests/s from labkit's generator and from a plain tritonclient loop, c=1 and c=8."""
    out: dict[str, float] = {}
    with _server_with(factory, "add_sub") as server:
        run_load(server, "add_sub", _ADD_SUB_INPUTS, requests=200)  # warm-up
        for c in (1, 8):
            # interleaved rounds, best of each: the server drifts between rounds on a small machine
            labkit_rps = plain_rps = 0.0
            for _ in range(5):
                labkit_rps = max(labkit_rps, run_load(server, "add_sub", _ADD_SUB_INPUTS, requests=_LOAD_REQUESTS, concurrency=c).throughput)
                plain_rps = max(plain_rps, _plain_loop(server, c, _LOAD_REQUESTS))
            out[f"c{c}_labkit_rps"] = round(labkit_rps, 1)
            out[f"c{c}_plain_rps"] = round(plain_rps, 1)
            out[f"c{c}_ratio"] = round(labkit_rps / plain_rps, 3)
    return out


def dashboard_overhead(factory: Factory) -> float:
    """Throughput with the live dashboard polling and redrawing at its defaults, over throughput without."""
    batch = {k: v[None, :] for k, v in _ADD_SUB_INPUTS.items()}
    with _server_with(factory, "add_sub_batching") as server:
        load = lambda: run_load(server, "add_sub_batching", batch, requests=_LOAD_REQUESTS, concurrency=8).throughput  # noqa: E731
        load()  # warm-up
        ratios = []
        for _ in range(3):
            without = load()
            with Dashboard(server, "add_sub_batching"):
                with_dash = load()
            ratios.append(with_dash / without)
    return statistics.median(ratios)


BENCHMARKS: dict[str, Callable[[Factory], Any]] = {
    "cold_start_s": cold_start_s,
    "python_reload_s": python_reload_s,
    "cpp_rebuild_reload_s": cpp_rebuild_reload_s,
    "cpp_first_build_s": cpp_first_build_s,
    "client_throughput": client_throughput,
    "crash_and_restart": crash_and_restart,
    "memory": memory,
    "dashboard_overhead": dashboard_overhead,
}
# name -> (target, "<" or ">"): what "met" means for each number
TARGETS: dict[str, tuple[float, str]] = {
    "cold_start_s": (3.0, "<"),
    "python_reload_s": (0.5, "<"),
    "cpp_rebuild_reload_s": (1.5, "<"),
    "client_throughput.c1_ratio": (0.95, ">"),
    "client_throughput.c8_ratio": (0.95, ">"),
    "dashboard_overhead": (0.97, ">"),
    "crash_and_restart.crash_detect_s": (2.0, "<"),
    "crash_and_restart.restart_reload_s": (5.0, "<"),
    "memory.server_rss_mb": (600.0, "<"),
    "memory.soak_rss_growth": (1.05, "<"),
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
                print(f"{name}.{key:18s} {v:10.3f}{_verdict(f'{name}.{key}', v)}", flush=True)
        else:
            results[name] = round(value, 4)
            print(f"{name:37s} {value:10.3f}{_verdict(name, value)}", flush=True)
    return results
