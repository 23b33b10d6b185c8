"""The room's hub: a JupyterHub process of labkit's environment that outlives `labkit room up`.

    pid = start_hub(settings, plumbing, secrets)   # returns once the hub answers on settings.port
    stop_hub(settings.directory)                   # `room down`: the hub stops its proxy and services

Its pid is in ``<room>/hub.pid`` and its log in ``<room>/hub.log``. configurable-http-proxy (npm) is
installed once into labkit's cache unless one is on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from .._downloads import cache_dir, fill_once, say
from ..errors import (
    PortTakenError,
    ServerNotRunningError,
    ServerStartError,
    SetupError,
    WaitTimeoutError,
)
from ..server._ports import ports_taken
from ..server.polling import wait_until
from .hubconfig import SECRET_ENV, Plumbing, render_config
from .settings import RoomSettings

PROXY_PACKAGE = "configurable-http-proxy@4"
PID_FILE = "hub.pid"
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
                "The room's proxy, configurable-http-proxy, needs Node.js and npm: install them "
                "(`apt-get install nodejs npm`) and run `labkit room up` again.",
                missing="npm",
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
                    f"`npm install {PROXY_PACKAGE}` failed (exit {proc.returncode}); is npm's registry "
                    f"reachable?\n{proc.stderr.strip()[-1200:]}",
                    missing=PROXY_PACKAGE,
                    reason="npm install failed",
                )

        fill_once(prefix, install)
    return (str(exe),)


def check_port(host: str, port: int) -> None:
    """PortTakenError (service "room") when another process holds the room's port."""
    if ports_taken([port], host or "0.0.0.0"):
        raise PortTakenError(port=port, service="room", host=host or "0.0.0.0")


def _wait_gone(pids: list[int], timeout_s: float) -> None:
    """Until every process of ``pids`` is gone, or ``timeout_s`` passed (the caller kills what is left)."""
    try:
        wait_until(lambda: all(_gone(pid) for pid in pids), timeout_s, "processes to end", interval_s=0.2)
    except WaitTimeoutError:
        pass


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
            f"A hub of this room already runs (pid {hub_pid(directory)}); "
            f"`labkit room down --dir {settings.directory}` first."
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
    (directory / PID_FILE).write_text(f"{proc.pid}\n")

    def answers() -> bool:
        code = proc.poll()
        if code is not None:
            (directory / PID_FILE).unlink(missing_ok=True)
            _stop_proxy(directory)
            raise ServerStartError(
                f"The hub exited (code {code}) before it answered; see {directory / LOG_FILE}.",
                _log_tail(directory),
                exit_summary=f"exit code {code}",
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


def _is_our_hub(pid: int, directory: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"jupyterhub" in cmdline and str(directory / CONFIG_FILE).encode() in cmdline


def hub_pid(directory: Path) -> int | None:
    """The pid of the room's running hub (from ``hub.pid``), or None."""
    directory = directory.absolute()
    try:
        pid = int((directory / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_our_hub(pid, directory) else None


def _stop_proxy(directory: Path) -> None:
    """The room's configurable-http-proxy, when its hub ended without stopping it (it runs in a session
    of its own; JupyterHub writes its pid into the room directory)."""
    try:
        pid = int((directory / "jupyterhub-proxy.pid").read_text().strip())
        if b"configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        pass


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (the hub's proxy and services run in sessions of their own)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _gone(pid: int) -> bool:
    try:  # our own child (the hub started by this process): reap it once it ended
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:  # not our child: its parent (or init) reaps it
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a zombie (our own child, not yet reaped) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def stop_hub(directory: Path, timeout_s: float = 120) -> bool:
    """Stop the room's hub (SIGTERM: it stops the proxy and its services, not the labs; SIGKILL after
    ``timeout_s``, then its remaining children by pid). False when no hub of this room ran."""
    directory = directory.absolute()
    pid = hub_pid(directory)
    if pid is None:
        (directory / PID_FILE).unlink(missing_ok=True)
        return False
    children = _children(pid)
    os.kill(pid, signal.SIGTERM)
    _wait_gone([pid], timeout_s)
    if not _gone(pid):
        print(f"labkit: the hub (pid {pid}) did not stop in {timeout_s:.0f} s; killing it", file=sys.stderr)
        os.kill(pid, signal.SIGKILL)
    _stop_proxy(directory)
    # the board removes its grader and scan containers when stopped: let it finish before any SIGKILL
    _wait_gone(children, 30)
    for child in children:
        if not _gone(child):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
    (directory / PID_FILE).unlink(missing_ok=True)
    return True


def require_hub(directory: Path) -> int:
    """The running hub's pid, or ServerNotRunningError saying how to start one."""
    pid = hub_pid(directory)
    if pid is None:
        raise ServerNotRunningError(
            f"No hub runs for the room in {directory}: start it with `labkit room up --dir {directory}`.", stopped=True
        )
    return pid
