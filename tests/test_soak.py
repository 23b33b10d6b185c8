"""A seeded random walk through the edit / fail / fix loop on one embedded server: Python and C++
edits, compile errors, load errors, fixes, returns to earlier sources (C++: build-cache hits),
restarts, unloads and reloads. After every step each model serves exactly the last source that
compiled and loaded, a failing step raised the labkit error that says why, and nothing crashed.

LABKIT_SOAK_SEED replays a run (the seed is printed); LABKIT_SOAK_STEPS changes its length.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import pytest
from cpp_support import scaled_by, scaling_model, scaling_source

import labkit
import labkit.server
from labkit.server import stubs

PY, CPP, CPP_BACKEND = "soak_py", "soak_cpp", "soakcpp"
STEPS = int(os.environ.get("LABKIT_SOAK_STEPS", "200"))
#: step kind -> weight
KINDS = {
    "py_edit": 12,
    "py_initialize_error": 6,
    "py_syntax_error": 6,
    "py_back": 5,
    "cpp_edit": 12,
    "cpp_compile_error": 6,
    "cpp_missing_entry_point": 3,
    "cpp_load_error": 8,
    "cpp_back": 8,
    "restart": 4,
    "unload_reload": 8,
}
#: C++ builds the cache keeps per backend (labkit.native.build prunes the older ones)
CACHE_KEEPS = 5


def python_source(factor: int, fault: str = "") -> str:
    """OUT0 = IN0 * factor; ``fault``: "initialize" raises there, "syntax" does not parse."""
    initialize = "        raise RuntimeError('initialize refused')\n" if fault == "initialize" else ""
    header = "def broken(:\n    pass\n" if fault == "syntax" else ""
    return f"""import numpy as np
import triton_python_backend_utils as pb_utils
{header}

class TritonPythonModel:
    def initialize(self, args):
        self.factor = {factor}
{initialize}
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT0", (x * self.factor).astype(np.int32))]))
        return responses
"""


def cpp_compile_error(factor: int) -> str:
    return scaling_source(factor).replace('batch.output("OUT0", in);', 'batch.output("OUT0", in)')


def cpp_missing_entry_point(factor: int) -> str:
    return scaling_source(factor).replace("TRITONBACKEND_ModelInstanceExecute(", "ModelInstanceExecuteTypo(")


class Walk:
    """The server, what each model should answer, and the sources that compiled and loaded."""

    def __init__(self, server: labkit.server.EmbeddedServer, rng: random.Random) -> None:
        self.server, self.rng = server, rng
        self.expected = {PY: 1, CPP: 1}
        self.py_good = [1]
        self.cpp_built: list[tuple[int, bool]] = [(1, True)]  # (factor, loads) in the order first compiled
        self.pid = server.runtime.triton_pid
        self.cache_hits = 0

    def check(self, step: int, kind: str) -> None:
        server = self.server
        assert server.alive and server.health.died is None, (
            f"step {step} ({kind}): the server died: {server.health.died}"
        )
        assert server.runtime.triton_pid == self.pid, f"step {step} ({kind}): Triton was restarted behind our back"
        for model, factor in self.expected.items():
            assert scaled_by(server, model) == factor, f"step {step} ({kind}): {model} does not serve x {factor}"

    def fails(self, error: type[labkit.LabkitError], call, *args, **kwargs) -> labkit.LabkitError:
        with pytest.raises(error) as info:
            call(*args, **kwargs)
        return info.value

    def step(self, step: int, kind: str) -> str:
        """Do one step of ``kind``; returns the kind actually done (a return needs an earlier source)."""
        server, factor = self.server, step + 2  # every new source answers with its own factor
        if kind == "py_edit" or (kind == "py_back" and len(self.py_good) < 2):
            server.python_model(PY, python_source(factor))
            self.expected[PY] = factor
            self.py_good.append(factor)
            return "py_edit"
        if kind == "py_back":
            factor = self.rng.choice([f for f in self.py_good if f != self.expected[PY]])
            server.python_model(PY, python_source(factor))
            self.expected[PY] = factor
            return kind
        if kind in ("py_initialize_error", "py_syntax_error"):
            fault = kind.split("_")[1]
            error = self.fails(labkit.ModelLoadError, server.python_model, PY, python_source(factor, fault))
            assert error.model == PY
            return kind
        cached = [f for f, loads in self.cpp_built[-CACHE_KEEPS:] if loads and f != self.expected[CPP]]
        if kind == "cpp_edit" or (kind == "cpp_back" and not cached):
            server.cpp_backend(CPP_BACKEND, scaling_source(factor), progress=False)
            self.expected[CPP] = factor
            self.cpp_built.append((factor, True))
            return "cpp_edit"
        if kind == "cpp_back":
            factor = self.rng.choice(cached)
            assert server.models.build(CPP_BACKEND, scaling_source(factor), progress=False).cached
            self.cache_hits += 1
            server.cpp_backend(CPP_BACKEND, scaling_source(factor), progress=False)
            self.expected[CPP] = factor
            return kind
        if kind == "cpp_compile_error":
            error = self.fails(
                labkit.BuildError, server.cpp_backend, CPP_BACKEND, cpp_compile_error(factor), progress=False
            )
            assert error.backend == CPP_BACKEND and error.compiler_output
            return kind
        if kind == "cpp_missing_entry_point":
            error = self.fails(
                labkit.BuildError, server.cpp_backend, CPP_BACKEND, cpp_missing_entry_point(factor), progress=False
            )
            assert error.backend == CPP_BACKEND
            return kind
        if kind == "cpp_load_error":
            error = self.fails(
                labkit.ModelLoadError,
                server.cpp_backend,
                CPP_BACKEND,
                scaling_source(factor, refuse_load=True),
                progress=False,
            )
            assert error.model == CPP
            self.cpp_built.append((factor, False))
            return kind
        if kind == "restart":
            assert server.restart() == sorted(self.expected)
            self.pid = server.runtime.triton_pid
            return kind
        if kind == "unload_reload":
            model = self.rng.choice(sorted(self.expected))
            server.unload(model)
            assert not server.models.is_model_ready(model)
            server.load(model)
            return kind
        raise AssertionError(f"unknown step kind {kind!r}")


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 2 minutes here; a slow CI machine gets room, the suite's 300 s would not do
def test_soak_edit_fail_fix_restart(capsys):
    seed = int(os.environ.get("LABKIT_SOAK_SEED", str(random.SystemRandom().randrange(10**6))))
    with capsys.disabled():
        print(f"\nsoak: seed {seed} (LABKIT_SOAK_SEED={seed} replays it), {STEPS} steps", flush=True)
    rng = random.Random(seed)
    done: Counter[str] = Counter()
    t0 = time.monotonic()
    with labkit.server.EmbeddedServer() as server:
        server.start()
        server.repository.write_config(
            labkit.model_config(PY, "python", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
        )
        server.python_model(PY, python_source(1))
        scaling_model(server, CPP, CPP_BACKEND)
        server.cpp_backend(CPP_BACKEND, scaling_source(1), progress=False)
        walk = Walk(server, rng)
        walk.check(0, "start")
        kinds, weights = list(KINDS), list(KINDS.values())
        for step in range(1, STEPS + 1):
            kind = rng.choices(kinds, weights)[0]
            try:
                kind = walk.step(step, kind)
                walk.check(step, kind)
            except BaseException:
                print(f"soak: seed {seed} failed at step {step} ({kind}) after {dict(done)}")
                raise
            done[kind] += 1
        log = server.logs.path.read_text()
        stub_signals = [e for e in stubs.exits(server.workspace.backend_dir / "python", PY, 0) if e.signal is not None]
        # Triton logs "Signal (N) received." for every signal; SIGTERM (15) is restart() stopping it
        crashes = [
            line
            for line in log.splitlines()
            if line.startswith("labkit-crash:") or (line.startswith("Signal (") and "(15)" not in line)
        ]
        crashes += [stubs.describe([e]) for e in stub_signals]
    seconds = time.monotonic() - t0
    with capsys.disabled():
        print(
            f"soak: seed {seed}: {sum(done.values())} steps in {seconds:.0f} s, {walk.cache_hits} build-cache hits, "
            f"crashes {len(crashes)}; by kind: {dict(sorted(done.items()))}",
            flush=True,
        )
    assert not crashes, crashes
    assert sum(done.values()) == STEPS
