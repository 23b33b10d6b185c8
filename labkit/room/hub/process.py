"""The room's hub: a JupyterHub process of labkit's environment that outlives `labkit room up`.

    pid = start_hub(settings, plumbing, secrets)   # returns once the hub answers on settings.port
    stop_hub(settings.directory)                   # `room down`: the hub, then whatever it left running

The hub, its proxy, the board and the idle culler are recorded in ``<room>/processes/`` as each starts
(labkit.room.hub.processes), so a hub that died leaves nothing that `room up` or `room down` cannot find. Its
log is ``<room>/hub.log``. configurable-http-proxy (npm) is installed once into labkit's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil

from ...errors import PortTakenError, ServerNotRunningError, ServerStartError, SetupError, WaitTimeoutError
from ...plumbing.downloads import cache_dir, fill_once, say
from ...plumbing.polling import wait_until
from ...plumbing.ports import ports_taken
from ..settings import RoomSettings
from . import processes
from .hubconfig import SECRET_ENV, Plumbing, render_config

PROXY_PACKAGE = "configurable-http-proxy@4"
HUB_ROLE = "hub"  # its record in <room>/processes/ (labkit.room.hub.processes)
PROXY_PID_FILE = "jupyterhub-proxy.pid"  # JupyterHub writes it in the hub's folder
LOG_FILE = "hub.log"
CONFIG_FILE = "jupyterhub_config.py"


def proxy_command() -> tuple[str, ...]:
    """configurable-http-proxy, installed with npm into labkit's cache on first use (one known version,
    whatever else is on PATH)."""
    prefix = cache_dir() / "configurable-http-proxy"
    exe = prefix / "node_modules" / ".bin" / "configurable-http-proxy"
    if not exe.exists():
        npm = shutil.which("npm")
        if npm is None or shutil.which("node") is None:
            raise SetupError(
                needed_by="The room's proxy, configurable-http-proxy,",
                missing="Node.js and npm",
                reason="npm is not installed",
                remedy="install them (`apt-get install nodejs npm`) and run `labkit room up` again",
            )
        say(f"installing {PROXY_PACKAGE} with npm into {prefix} (once, a few seconds) ...")

        def install(partial: Path) -> None:
            proc = subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(partial),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    PROXY_PACKAGE,
                ],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise SetupError(
                    needed_by="The room",
                    detail=f"exit {proc.returncode}\n{proc.stderr.strip()[-1200:]}",
                    remedy="is npm's registry reachable?",
                    missing=PROXY_PACKAGE,
                    reason="npm install failed",
                )

        fill_once(prefix, install)
    return (str(exe),)


def check_port(host: str, port: int) -> None:
    """PortTakenError (service "room") when another process holds the room's port."""
    if ports_taken([port], host or "0.0.0.0"):
        raise PortTakenError(port=port, service="room", host=host or "0.0.0.0")


def _log_tail(directory: Path, lines: int = 30) -> str:
    try:
        return "\n".join((directory / LOG_FILE).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def hub_answers(port: int, timeout: float = 2.0, host: str = "") -> bool:
    """Whether a JupyterHub answers its REST API on ``host`` (default 127.0.0.1):``port``."""
    host = host if host not in ("", "0.0.0.0") else "127.0.0.1"
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/hub/api/", timeout=timeout) as reply:
            return "version" in json.loads(reply.read() or b"{}")
    except (OSError, ValueError):
        return False


def start_hub(settings: RoomSettings, plumbing: Plumbing, secrets: dict[str, str], timeout_s: float = 120) -> int:
    """Write the configuration, start JupyterHub in the background and wait until it answers; its pid."""
    directory = settings.directory.absolute()
    if hub_pid(directory) is not None:
        raise ServerStartError(
            doing="Cannot start the room's hub",
            reason=f"a hub of this room already runs (pid {hub_pid(directory)})",
            remedy=f"`labkit room down --dir {settings.directory}` first",
        )
    check_port(settings.ip, settings.port)
    config = directory / CONFIG_FILE
    config.write_text(render_config(settings, plumbing))
    env = dict(os.environ, **{SECRET_ENV[key]: value for key, value in secrets.items()})
    env["PYTHONUNBUFFERED"] = "1"
    with open(directory / LOG_FILE, "ab") as log:
        proc = subprocess.Popen(
            [plumbing.python, "-m", "jupyterhub", "-f", str(config)],
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )  # Ctrl-C in the teacher's shell does not stop the room
    processes.write(processes.folder_of(directory), HUB_ROLE, proc.pid)

    def answers() -> bool:
        code = proc.poll()
        if code is not None:
            stop_hub(directory)  # what it started before it exited
            raise ServerStartError(
                doing="The room's hub did not start",
                reason="it exited before it answered",
                exit_summary=f"exit code {code}",
                log_tail=_log_tail(directory),
                remedy=f"see {directory / LOG_FILE}",
            )
        return hub_answers(settings.port, host=settings.ip)

    try:
        wait_until(answers, timeout_s, "the room's hub to answer", interval_s=0.3)
    except WaitTimeoutError:
        stop_hub(directory)
        raise WaitTimeoutError(
            what="the room's hub to answer", timeout_s=timeout_s, log_tail=_log_tail(directory)
        ) from None
    proc.returncode = 0  # the hub outlives this process on purpose: no "still running" warning at exit
    return proc.pid


def _hub(directory: Path) -> psutil.Process | None:
    """The room's running hub: its record's process, or (that record lost) the parent of a process the
    hub started and recorded, when it runs in the room's folder as the hub does."""
    folder = processes.folder_of(directory)
    hub = processes.find(folder, HUB_ROLE)
    if hub is not None:
        return hub
    for record in processes.read(folder):
        child = processes.running(record)
        try:
            parent = child.parent() if child is not None else None
            if parent is not None and parent.pid != 1 and Path(parent.cwd()) == directory:
                return parent
        except psutil.Error:
            continue
    return None


def hub_pid(directory: Path) -> int | None:
    """The pid of the room's running hub, or None."""
    hub = _hub(Path(directory).absolute())
    return hub.pid if hub is not None else None


def stop_hub(directory: Path, timeout_s: float = 120) -> list[str]:
    """Stop the room's hub (SIGTERM: it stops its proxy and services, not the labs; SIGKILL after
    ``timeout_s``), then end whatever else of the room's recorded processes still runs: the proxy, board and
    culler of a hub that died. What was stopped, one ``role (pid N)`` each (empty: nothing ran)."""
    directory = directory.absolute()
    folder = processes.folder_of(directory)
    stopped = []
    hub = _hub(directory)
    if hub is not None:
        hub.terminate()
        _, alive = psutil.wait_procs([hub], timeout=timeout_s)
        if alive:
            print(f"labkit: the hub (pid {hub.pid}) did not stop in {timeout_s:.0f} s; killing it", file=sys.stderr)
            hub.kill()
            psutil.wait_procs([hub], timeout=10)
        stopped.append(f"{HUB_ROLE} (pid {hub.pid})")
    stopped += [s for s in processes.end(folder) if not s.startswith(f"{HUB_ROLE} ")]
    # JupyterHub's own proxy pid file: its next start would signal that pid, whatever runs there by then
    (directory / PROXY_PID_FILE).unlink(missing_ok=True)
    return stopped


def require_hub(directory: Path) -> int:
    """The running hub's pid, or ServerNotRunningError saying how to start one."""
    pid = hub_pid(directory)
    if pid is None:
        raise ServerNotRunningError(
            reason=f"no hub runs for the room in {directory}",
            stopped=True,
            remedy=f"start it with `labkit room up --dir {directory}`",
        )
    return pid
