"""`labkit bench`: the lab's latency targets, measured on this machine and printed as numbers."""

from __future__ import annotations

import statistics
import time
from typing import Any

from . import reference_repository
from .requests import check_add_sub
from .server import EmbeddedServer

_RELOAD_ROUNDS = 5
_COLD_ROUNDS = 3


def cold_start_s() -> float:
    """Launch to READY with add_sub loaded and answering, median of a few launches."""
    times = []
    for _ in range(_COLD_ROUNDS):
        t0 = time.perf_counter()
        with EmbeddedServer() as server:
            server.start()
            server.repository.copy_model_from(reference_repository(), "add_sub")
            server.load("add_sub")
            check_add_sub(server)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def python_reload_s() -> float:
    """Edit model.py -> reloaded -> first correct answer from the new code; median of several edits."""
    source = (reference_repository() / "add_sub" / "1" / "model.py").read_text()
    if "a + b" not in source:
        raise RuntimeError("the reference add_sub model.py changed; update the benchmark's edit")
    times = []
    with EmbeddedServer() as server:
        server.start()
        server.repository.copy_model_from(reference_repository(), "add_sub")
        server.load("add_sub")
        for round_ in range(1, _RELOAD_ROUNDS + 1):
            edited = source.replace("a + b", f"a + b + {round_}")
            t0 = time.perf_counter()
            server.python_model("add_sub", edited)
            result = check_add_sub(server, check=False)
            times.append(time.perf_counter() - t0)
            if not (result.output0 == result.input0 + result.input1 + round_).all():
                raise RuntimeError(f"reload round {round_}: the old code answered")
    return statistics.median(times)


BENCHMARKS = {"cold_start_s": cold_start_s, "python_reload_s": python_reload_s}
TARGETS = {"cold_start_s": 3.0, "python_reload_s": 1.0}


def run(only: list[str] | None = None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, fn in BENCHMARKS.items():
        if only and name not in only:
            continue
        value = fn()
        results[name] = round(value, 4)
        target = TARGETS.get(name)
        verdict = "" if target is None else (f"  (target < {target} s: {'met' if value < target else 'MISSED'})")
        print(f"{name:24s} {value:8.3f} s{verdict}", flush=True)
    return results
