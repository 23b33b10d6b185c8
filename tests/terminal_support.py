"""A breakpoint() in a model.py and a terminal to drive pdb through, shared by test_breakpoints and its Docker
run (test_docker_backends)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from pathlib import Path

MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN0").as_numpy()
            scale = 2.0
            breakpoint()
            y = self.scaled(x, scale)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT0", y)]))
        return responses

    def scaled(self, x, scale):
        return x * scale
"""


# A script that sends one request (or two) from its main thread, as a person's script or notebook does.
CHILD = """
import sys
import numpy as np
import labkit

protocol, requests = sys.argv[1], int(sys.argv[2])
kind = sys.argv[4] if len(sys.argv) > 4 else "embedded"
lab = labkit.start(server=kind, timeout_s=120, **({"image": sys.argv[5]} if kind == "docker" else {}))
lab.repository.write_config(labkit.model_config("dbg", "python", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])]))
lab.python_model("dbg", open(sys.argv[3]).read())
print("READY", flush=True)
for _ in range(requests):
    try:
        out = labkit.infer(lab, "dbg", {"IN0": np.ones(4, np.float32)}, protocol=protocol, timeout_s=3)
        print("ANSWER", out["OUT0"].tolist(), flush=True)
    except labkit.LabkitError as exc:
        print("FAILED", type(exc).__name__, exc, flush=True)
lab.stop()
"""


class Terminal:
    """A child process whose stdin and stdout we hold, read until a pattern shows up."""

    def __init__(self, argv: list[str], cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.text = ""

    def expect(self, pattern: str, timeout_s: float = 60.0) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while True:
            match = re.search(pattern, self.text)
            if match:
                self.text = self.text[match.end() :]
                return match
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"no {pattern!r} within {timeout_s} s; output so far:\n{self.text}")
            chunk = os.read(self.proc.stdout.fileno(), 65536).decode(errors="replace")
            if not chunk:
                raise AssertionError(f"the process ended before {pattern!r}; output:\n{self.text}")
            self.text += chunk

    def send(self, line: str) -> None:
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def pdb(self, command: str, expected: str) -> str:
        """Send a pdb command at its prompt; returns its output up to the next prompt, which must match."""
        self.send(command)
        out = self.expect(r"([\s\S]*?)\(Pdb\) ").group(1)
        assert re.search(expected, out), f"{command!r} printed:\n{out}"
        return out

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
