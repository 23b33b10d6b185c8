"""Triton 23.12 as a child process, from the tritonserver binary in the nvidia-pytriton wheel."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from .. import _triton_dist
from ..errors import ServerStartError, SetupError
from ..repository import ModelRepository
from . import _process
from ._ports import free_ports
from .base import TritonServer

_LIBPYTHON = f"libpython{sys.version_info.major}.{sys.version_info.minor}.so.1.0"


def _libpython_dir() -> str | None:
    """The folder of this Python's shared libpython, which the stub links; None if the system one serves."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if (Path(libdir) / _LIBPYTHON).exists():
        return libdir
    ldconfig = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    if _LIBPYTHON in ldconfig:
        return None
    raise SetupError(
        f"This Python ({sys.executable}) has no shared {_LIBPYTHON}, which Triton's Python backend stub needs. "
        f"Use a Python built with --enable-shared, or install Debian's libpython{sys.version_info.major}."
        f"{sys.version_info.minor} package."
    )


_WORKDIR_PREFIX = "labkit-"
_OWNER_FILE = "owner.pid"
_SERVER_FILE = "server.pid"
_SHM = Path("/dev/shm")
_servers_started = itertools.count(1)


def _shm_prefix(owner: int, serial: int) -> str:
    # Triton's default region name is the same for every server on the machine: two servers would
    # share (and corrupt) one region. A prefix per owner process and server keeps them apart.
    return f"labkit_{owner}_{serial}_"


def _free_shm(prefix: str) -> None:
    for region in _SHM.glob(f"{prefix}*"):
        region.unlink(missing_ok=True)


def _sweep_stale_shm() -> None:
    """Unlink the Python backend's shared-memory regions of labkit processes that are gone."""
    for region in _SHM.glob("labkit_*_*"):
        owner = region.name.split("_")[1]
        if owner.isdigit() and int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
            region.unlink(missing_ok=True)


def _sweep_stale_workdirs() -> None:
    """Clean up after owners that are gone (a killed kernel cannot): end a Triton still running
    from their folder, then remove the folder. Only folders with our owner file are touched."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_WORKDIR_PREFIX}*"):
        try:
            owner = int((folder / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not one of ours, or being created right now
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        try:
            server = int((folder / _SERVER_FILE).read_text())
            cmdline = Path(f"/proc/{server}/cmdline").read_bytes()
        except (OSError, ValueError):
            server, cmdline = 0, b""
        # Kill only a tritonserver started with this folder (pids get reused), and its stubs with it.
        if b"tritonserver" in cmdline and str(folder).encode() in cmdline:
            try:
                os.killpg(server, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(folder, ignore_errors=True)
    _sweep_stale_shm()  # after the servers above are gone, so their stubs no longer hold regions


class EmbeddedServer(TritonServer):
    """Runs the real tritonserver 2.41.0 locally: no Docker, no GPU.

    ``repository`` defaults to ``<workdir>/repository``; ``workdir`` (logs, backend folder) defaults to a
    new temporary folder that ``stop()`` removes.

    ``auto_complete`` lets backends fill in what a config leaves out (inputs, outputs, max_batch_size).
    It is off by default: in 23.12, loading a model.py with a syntax error while other Python models
    are loaded can hang with it on for many minutes (fixed in 24.05), and with it off every load is
    faster. Turn it on only for a server that serves backends relying on it.
    """

    kind = "embedded"

    def __init__(
        self,
        repository: str | Path | None = None,
        workdir: str | Path | None = None,
        *,
        log_verbose: int = 0,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        auto_complete: bool = False,
    ) -> None:
        self._own_workdir = workdir is None
        _sweep_stale_workdirs()  # whatever killed labkit sessions left behind
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=_WORKDIR_PREFIX)).resolve()
        if self._own_workdir:
            (self.workdir / _OWNER_FILE).write_text(str(os.getpid()))
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        repo = ModelRepository(repository if repository is not None else self.workdir / "repository")
        super().__init__(repo, self.workdir / "logs" / "tritonserver.log", self.workdir / "backends")
        self.log_verbose = log_verbose
        self.extra_args = list(extra_args or [])
        self.extra_env = dict(env or {})  # e.g. LD_PRELOAD of a sanitizer runtime, for the server only
        self.auto_complete = auto_complete
        self.dist = _triton_dist.locate()
        self._proc: subprocess.Popen | None = None
        self._shm_prefix = _shm_prefix(os.getpid(), next(_servers_started))

    def _assemble_backends(self) -> None:
        python = self.backend_dir / "python"
        python.mkdir(parents=True, exist_ok=True)
        files = [p for p in self.dist.python_backend_dir.iterdir() if p.is_file()]
        files.append(self.dist.stub_for(sys.version_info[:2]))
        for src in files:
            dst = python / src.name
            if not dst.exists() or dst.stat().st_size != src.stat().st_size:
                shutil.copy2(src, dst)  # copies, not links: the folder may be mounted into a container later

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        libs = [str(self.dist.lib_dir)]
        libpython = _libpython_dir()
        if libpython:
            libs.append(libpython)
        if env.get("LD_LIBRARY_PATH"):
            libs.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
        # The stub embeds the first python3 on PATH: make it this environment's, so model.py sees our packages.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["PYTHONUNBUFFERED"] = "1"  # print() in model.py shows up at once, not at unload
        env.update(self.extra_env)
        return env

    def _argv(self) -> list[str]:
        return [
            str(self.dist.binary),
            f"--model-repository={self.repository.root}",
            f"--backend-directory={self.backend_dir}",
            "--model-control-mode=explicit",
            # Auto-complete on lets a broken model.py hang loads for minutes in 23.12.
            *([] if self.auto_complete else ["--disable-auto-complete-config"]),
            "--strict-readiness=true",
            f"--http-address={self.host}",
            f"--grpc-address={self.host}",
            f"--metrics-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false",
            f"--backend-config=python,shm-region-prefix-name={self._shm_prefix}",
            f"--log-verbose={self.log_verbose}",
            "--exit-timeout-secs=5",
            *self.extra_args,
        ]

    def _launch(self) -> None:
        self._assemble_backends()
        env = self._environment()
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3, self.host)
        self._proc = _process.spawn(self._argv(), env, self.logs.path, self.workdir)
        (self.workdir / _SERVER_FILE).write_text(str(self._proc.pid))

    def start(self, timeout_s: float = 60.0) -> "EmbeddedServer":
        # Another process may grab a port between our probe and Triton's bind: retry on fresh ports.
        for attempt in range(3):
            mark = self.logs.mark()
            try:
                super().start(timeout_s)
                return self
            except ServerStartError:
                if attempt == 2 or "Address already in use" not in self.logs.since(mark):
                    raise
                self._stopped = False
        return self

    def _end_process(self) -> None:
        if self._proc is not None:
            _process.stop_group(self._proc)
        _free_shm(self._shm_prefix)  # a killed stub cannot unlink its regions

    def _terminate(self) -> None:
        died_on_its_own = self._proc is not None and self._proc.poll() is not None
        self._end_process()
        if self._own_workdir and not died_on_its_own:  # keep the log of a crash for reading
            shutil.rmtree(self.workdir, ignore_errors=True)

    def rss_bytes(self) -> int:
        """Resident memory of the server and everything it started (its Python stubs)."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == self.pid:  # the process group: tritonserver and its stubs
                    total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # rss, in pages
            except (OSError, IndexError, ValueError):
                continue  # a process that ended while we looked
        return total

    def _exit_summary(self) -> str:
        code = self._proc.poll() if self._proc is not None else None
        if code is None:
            return ""
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and not self._stopped

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None
