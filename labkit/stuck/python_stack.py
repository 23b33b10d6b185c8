"""Where a Python model is right now: ``py-spy dump`` of the stub processes serving its instances,
trimmed to the model.py frames (line numbers and the lines themselves).

Stubs are found where Triton runs (here, or in its container) among the processes of Triton's
process group: labkit's launcher runs each real stub as ``.../python/stub/triton_python_backend_stub``
with the instance name (``<model>_<group>_<index>``) as its 8th argument.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..repository.files import source_line
from .debuggers import PY_SPY, Beside, missing_text

REAL_STUB_SUFFIX = "/stub/triton_python_backend_stub"
_INSTANCE_ARG = 8
# Runs with any python3 (3.8+) where Triton runs: the processes of one process group, as JSON.
_LIST_GROUP = """
import json, os, sys
group, found = int(sys.argv[1]), []
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        if os.getpgid(int(name)) != group:
            continue
        with open("/proc/%s/cmdline" % name, "rb") as handle:
            argv = handle.read().split(b"\\0")[:-1]
    except OSError:
        continue
    found.append([int(name), [a.decode("utf-8", "replace") for a in argv]])
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Stub:
    """One Python stub process serving an instance of a model."""

    pid: int
    instance: str


def stub_processes(beside: Beside, model: str) -> list[Stub]:
    """The live stubs of ``model``'s instances (every generation: a reload starts new ones)."""
    if beside.triton_pid is None:
        return []
    code, out, _ = beside.run_beside(["python", "-c", _LIST_GROUP, str(beside.triton_pid)], 15.0)
    if code != 0:
        return []
    instance = re.compile(rf"{re.escape(model)}_\d+_\d+")
    stubs = []
    for pid, argv in json.loads(out or "[]"):
        if argv and argv[0].endswith(REAL_STUB_SUFFIX) and len(argv) > _INSTANCE_ARG:
            if instance.fullmatch(argv[_INSTANCE_ARG]):
                stubs.append(Stub(pid, argv[_INSTANCE_ARG]))
    return sorted(stubs, key=lambda s: s.pid)


def _user_frames(dump: list[dict]) -> list[dict]:
    """model.py frames of every thread, innermost first."""
    return [f for thread in dump for f in thread.get("frames", []) if Path(f.get("filename", "")).name == "model.py"]


def describe_frames(frames: list[dict]) -> str:
    """model.py frames (py-spy's, innermost first) as lines, innermost last, like a traceback."""
    lines = []
    for frame in reversed(frames):
        text = source_line(frame["filename"], frame["line"])
        lines.append(f"    model.py:{frame['line']} in {frame['name']}" + (f":  {text}" if text else ""))
    return "\n".join(lines)


def busy_stubs(beside: Beside, model: str) -> list[tuple[Stub, list[dict]]] | None:
    """The stubs of ``model`` inside model.py right now, with their frames; None without py-spy."""
    tool = beside.debug_tool(PY_SPY)
    if tool is None:
        return None
    busy = []
    for stub in stub_processes(beside, model):
        # --nonblocking: a stub held stopped misses Triton's one-second health window and its load or
        # request fails ("Stub process ... is not healthy", python_backend r23.12 src/stub_launcher.cc:555).
        code, out, _ = beside.run_beside([tool, "dump", "--nonblocking", "--pid", str(stub.pid), "--json"], 20.0)
        if code != 0:
            continue  # it ended while we looked, or cannot be read
        try:
            frames = _user_frames(json.loads(out))
        except ValueError:
            continue
        if frames:
            busy.append((stub, frames))
    return busy


def python_stack(beside: Beside, model: str) -> str:
    """The model.py frames each busy stub of ``model`` is in, as text ("" if none is in model.py)."""
    busy = busy_stubs(beside, model)
    if busy is None:
        return missing_text(beside, PY_SPY)
    return "\n".join(
        f"  stub of instance {stub.instance} (pid {stub.pid}), innermost last:\n{describe_frames(frames)}"
        for stub, frames in busy
    )
