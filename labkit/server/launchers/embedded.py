"""Triton 23.12 as a child process, from the tritonserver binary in the nvidia-pytriton wheel."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from ... import stub_side
from ...errors import SetupError
from ...gpu import detect as gpu
from ...plumbing import process_groups, triton_dist
from ...plumbing.downloads import system_has
from ...plumbing.endpoints import Endpoints
from ...plumbing.ports import claim_ports, ports_taken
from ...stuck.debuggers import host_tool
from .. import leftovers, stubs, user_backends
from ..base import TritonServer, compose
from ..runtime import SERVER_FILE, RuntimeDefaults, Workspace
from ..server_config import ServerConfig, TritonPlace, argv

LIBPYTHON = f"libpython{sys.version_info.major}.{sys.version_info.minor}.so.1.0"


def libpython_dir() -> str | None:
    """The folder of this Python's shared libpython, which the stub links; None if the system one serves."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if (Path(libdir) / LIBPYTHON).exists():
        return libdir
    if system_has(LIBPYTHON):
        return None
    raise SetupError(
        needed_by=f"Triton's Python backend stub (for this Python, {sys.executable})",
        missing=f"a shared {LIBPYTHON}",
        reason="this Python has none",
        remedy=f"Use a Python built with --enable-shared, or install Debian's libpython{sys.version_info.major}.{sys.version_info.minor} package",
    )


class EmbeddedRuntime(RuntimeDefaults):
    """Runs the real tritonserver 2.41.0 locally, as a child process: no Docker needed; a GPU is used
    when one is visible (KIND_GPU models, and Triton's GPU metrics follow ``labkit.gpu.visible()``).

    ``env``: extra environment variables for the server only (e.g. LD_PRELOAD of a sanitizer runtime).
    ``kill_on_end``: end Triton with SIGKILL to its whole group at once, without asking (for a Triton
    whose exit is known to hang, such as one with a sanitizer runtime preloaded).
    """

    kind = "embedded"
    launch_attempts = 3  # another process may grab a free port between our probe and Triton's bind

    def __init__(self, workspace: Workspace, *, env: dict[str, str] | None = None, kill_on_end: bool = False) -> None:
        super().__init__(workspace)
        self.extra_env = dict(env or {})
        self.kill_on_end = kill_on_end
        triton_dist.check_python(sys.version_info[:2], sys.executable)  # before the wheel is fetched
        self.dist = triton_dist.locate()
        self._proc: subprocess.Popen | None = None
        self._ports: tuple[int, int, int] = (0, 0, 0)
        self._fixed = False  # ports were asked for: a taken one is never retried on others
        self._shm_prefix = ""
        self._host = "127.0.0.1"

    def _assemble_backends(self) -> None:
        python = self.workspace.backend_dir / "python"
        python.mkdir(parents=True, exist_ok=True)
        files = [p for p in self.dist.python_backend_dir.iterdir() if p.is_file()]
        for src in (p for p in files if p.name not in stub_side.TRITON_OWN):
            dst = python / src.name
            if dst.is_symlink():  # a link into a container image, from a Docker run in this workdir
                dst.unlink()
            if not dst.exists() or dst.stat().st_size != src.stat().st_size:
                shutil.copy2(src, dst)  # copies, not links: the folder may be mounted into a container later
        # labkit's stand-ins take the stub's and the utilities' places and run Triton's own from stub/.
        own = [p for p in files if p.name in stub_side.TRITON_OWN] + [self.dist.stub_for(sys.version_info[:2])]
        stubs.copy_triton_own(python, own)
        stubs.install(python)

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        libs = [str(self.dist.lib_dir)]
        libpython = libpython_dir()
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

    def launch(self, config: ServerConfig) -> Endpoints:
        self.new_run()
        self._fixed = any(config.ports.values())
        self._assemble_backends()
        user_backends.link(self.workspace.backend_dir, config.backend_directory)
        env = self._environment()
        ports = claim_ports(config.ports, config.host)
        self._ports = http, grpc, metrics = ports["http"], ports["grpc"], ports["metrics"]
        self._shm_prefix, self._host = config.shm_prefix, config.host
        place = TritonPlace(
            str(self.workspace.repository.root),
            str(self.workspace.backend_dir),
            config.host,
            http,
            grpc,
            metrics,
            gpu_metrics=gpu.visible(),
        )
        self._proc = process_groups.spawn(
            argv(config, place, str(self.dist.binary)), env, self.workspace.logs.path, self.workspace.workdir
        )
        (self.workspace.workdir / SERVER_FILE).write_text(str(self._proc.pid))
        return Endpoints(config.host, http, grpc, metrics)

    def retry_launch(self) -> bool:
        return not self._fixed and ports_taken(list(self._ports), self._host)

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def after_death(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # the stubs: Triton led their process group
            except ProcessLookupError:
                pass

    def end(self, grace_s: float = 0.0) -> None:
        if self.kill_on_end:
            self.after_death()
        if self._proc is not None:
            # A killed Triton skips python_backend's finalize, which removes the /tmp/python_env_* folder
            # it made (python_backend r23.12 src/pb_env.cc:325): stop() gives an idle one its grace. Without
            # that backend there is nothing to remove, and Triton's own exit would cost a second.
            graceful = grace_s > 0 and _maps_python_backend(self._proc.pid)
            process_groups.stop_group(self._proc, grace_s=grace_s if graceful else 0.0)
        if self._shm_prefix:
            leftovers.free_shm(self._shm_prefix)  # a killed stub cannot unlink its regions

    def triton_threads(self) -> Path | None:
        return Path(f"/proc/{self._proc.pid}/task") if self._proc is not None else None

    def exit_summary(self) -> str:
        code = self._proc.poll() if self._proc is not None else None
        if code is None:
            return ""
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def rss_bytes(self) -> int:
        """Resident memory of the server and everything it started (its Python stubs)."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == self.triton_pid:  # the process group: tritonserver and its stubs
                    total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # rss, in pages
            except (OSError, IndexError, ValueError):
                continue  # a process that ended while we looked
        return total

    # -- tools beside Triton: on this machine, Triton being our child ----------------------------------

    @property
    def triton_pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def run_beside(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str, str]:
        argv = [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return 124, "", f"{argv[0]} did not finish within {timeout_s:.0f} s"
        except OSError as exc:
            return 127, "", f"could not run {argv[0]}: {exc}"
        return proc.returncode, proc.stdout, proc.stderr

    def debug_tool(self, name: str) -> str | None:
        return host_tool(name)

    def signal_beside(self, pid: int, sig: int) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class EmbeddedServer(TritonServer):
    """A TritonServer whose Triton runs here (EmbeddedRuntime). Takes the repository and work folders,
    ServerConfig's options and EmbeddedRuntime's (``env=``, ``kill_on_end=``) as keywords."""

    __slots__ = ()

    def __init__(self, repository: str | Path | None = None, workdir: str | Path | None = None, **options: Any) -> None:
        leftovers.sweep()  # whatever killed labkit sessions left behind
        super().__init__(*compose(EmbeddedRuntime, repository, workdir, options))


def _maps_python_backend(pid: int) -> bool:
    """Whether Triton's process has loaded python_backend (a model of it was loaded since the start)."""
    try:
        return "libtriton_python.so" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
