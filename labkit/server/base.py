"""What every labkit server offers, whichever way Triton runs: start and stop, readiness, a crash
watchdog, restart, URLs and clients, and one translation of "the server died" into an error.

A launcher (``labkit/server/launchers/<kind>.py``) subclasses TritonServer and fills in the
underscored hooks: how to launch Triton, whether it still runs, how to end it, and how it ended.
The model calls (load, unload, Python and C++ backends) come from ModelControl.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from ..errors import LabkitError, ServerError, ServerNotRunningError, ServerStartError
from ..native.crash import Crash
from ..native.crash import read as read_crash
from ..native.toolchain import LocalToolchain, Toolchain
from ..repository import ModelRepository
from .attempts import Attempt
from .beside import Beside
from .connection import CONNECTION_ERRORS, unreachable
from .logs import LogView
from .model_control import ModelControl
from .options import TritonOptions
from .owner import Owner

_LIVE: "weakref.WeakSet[TritonServer]" = weakref.WeakSet()

WORKDIR_PREFIX = "labkit-"
OWNER_FILE = "owner.pid"
OWNER_START_FILE = "owner.start"
SERVER_FILE = "server.pid"

#: How long stop() waits for the models to unload (a Python model takes about 1 s in 23.12) before it
#: ends the server anyway: a stuck model never finishes, and Triton's own exit would wait for it.
STOP_UNLOAD_S = 1.5

_current: "TritonServer | None" = None
_servers_started = itertools.count(1)


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


def current() -> "TritonServer":
    """The server started last in this process that still runs (what the notebook magics talk to):
    after ``lab2.stop()``, ``lab`` again."""
    if _current is not None and _current.alive:
        return _current
    running = [s for s in list(_LIVE) if s.alive]
    if not running:
        raise ServerNotRunningError("No labkit server is running; start one with `lab = labkit.start()`.")
    return max(running, key=lambda s: s.started_seq)


class TritonServer(ModelControl, Beside, ABC):
    """A running Triton 23.12. Use as a context manager, or call ``stop()``; exit stops it anyway.

    Options every launcher takes:
        repository: the model repository folder (default ``<workdir>/repository``).
        workdir: logs and the backend folder (default: a new temporary folder that ``stop()`` removes).
        auto_complete: let backends fill in what a config leaves out. Off by default: in 23.12,
            loading a model.py with a syntax error while other Python models are loaded can hang with
            it on for many minutes (fixed in 24.05), and with it off every load is faster.
        log_verbose, extra_args: Triton's ``--log-verbose`` and any further command-line options.
        request_timeout_s: how long labkit's requests to this server wait for an answer by default
            (each call can override it); then they raise RequestTimeoutError.
        load_timeout_s: how long a model load may take by default (``load(timeout_s=)`` overrides it);
            then it raises LoadTimeoutError, after ending a stuck Python ``initialize``.
    """

    host = "127.0.0.1"
    kind = "abstract"
    #: How many launches start() tries when _retry_launch() says a failure was a passing one.
    launch_attempts = 1

    def __init__(
        self,
        repository: str | Path | None = None,
        workdir: str | Path | None = None,
        *,
        auto_complete: bool = False,
        log_verbose: int = 0,
        extra_args: list[str] | None = None,
        request_timeout_s: float = 30.0,
        load_timeout_s: float = 120.0,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.kind}-")).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._own_workdir:  # so that the next launch can clean up if this process is killed
            owner = Owner.me()
            (self.workdir / OWNER_START_FILE).write_text(owner.start)
            (self.workdir / OWNER_FILE).write_text(str(owner.pid))
        (self.workdir / "logs").mkdir(exist_ok=True)
        (self.workdir / "traces").mkdir(exist_ok=True)
        self.repository = ModelRepository(repository if repository is not None else self.workdir / "repository")
        self.logs = LogView(self.workdir / "logs" / "tritonserver.log")
        self.backend_dir = self.workdir / "backends"
        self.auto_complete = auto_complete
        self.log_verbose = log_verbose
        self.extra_args = list(extra_args or [])
        self.request_timeout_s = request_timeout_s
        self.load_timeout_s = load_timeout_s
        self.shm_prefix = f"labkit_{os.getpid()}_{next(_servers_started)}_"
        self.started_seq = 0  # set by each start(): which server current() falls back to
        self.http_port = self.grpc_port = self.metrics_port = 0
        #: Changes at every launch: Triton state that lives as long as one process (e.g. the backend
        #: libraries it has opened) is keyed by it.
        self.run_id = ""
        # tritonclient's HTTP client runs on gevent and cannot cross threads: one per thread.
        self._local = threading.local()
        self._clients: list[httpclient.InferenceServerClient] = []
        self._clients_lock = threading.Lock()
        self._launched = False
        self._stopped = False
        self._watchdog: threading.Thread | None = None
        self._toolchain: Toolchain | None = None
        #: Called with a model's name just before labkit (re)loads it, e.g. so a statistics
        #: collector can read the counters a reload is about to reset.
        self.before_load: list[Callable[[str], None]] = []
        self._loaded: set[str] = set()  # what restart() brings back
        #: Per model or backend, what became of the latest source written for it (see attempts.py).
        self.attempts: dict[str, Attempt] = {}
        self._in_flight: dict[str, int] = {}
        #: Set (to the error) when the watchdog sees the server die on its own.
        self.died: ServerNotRunningError | None = None
        self._log_start = 0  # where this launch's part of the log begins
        self._crash: tuple[str, Crash | None] | None = None  # (run_id, what the log says)

    # -- what a launcher implements -------------------------------------------------------------------

    @abstractmethod
    def _launch(self) -> None:
        """Start Triton (it need not be ready yet) and set the three ports."""

    @abstractmethod
    def _process_running(self) -> bool:
        """Whether Triton's process (or container) still runs."""

    @abstractmethod
    def _end_process(self) -> None:
        """End Triton (its process or container) and what it holds; keep the files."""

    def _exit_summary(self) -> str:
        """How the server ended, e.g. "exit code 137"; launchers that know say so."""
        return ""

    def _failure_tail(self) -> str:
        """The log lines that explain a failure."""
        return self.logs.tail(25)

    def _after_death(self) -> None:
        """Called once when Triton died on its own: end what it left running (its Python stubs hold
        copies of its sockets, so a client waiting for an answer would otherwise wait on)."""

    def _retry_launch(self) -> bool:
        """After a failed launch (already ended): was it a passing failure worth another try?"""
        return False

    def _triton_threads(self) -> Path | None:
        """``/proc/<pid>/task`` of the Triton process, where this machine sees it; None elsewhere."""
        return None

    def _host_path(self, path: str) -> str:
        """A path as Triton sees it, on this machine (launchers that mount folders elsewhere map it)."""
        return path

    def describe(self) -> str:
        """A short name for messages, e.g. "embedded" or "docker, labkit/tritonserver:23.12-cpu"."""
        return self.kind

    def options(self, **where: Any) -> TritonOptions:
        """Triton's options for this server; ``where`` gives what the launcher decides (paths as
        Triton sees them, address, ports)."""
        return TritonOptions(
            **where, shm_prefix=self.shm_prefix, auto_complete=self.auto_complete,
            log_verbose=self.log_verbose, extra_args=self.extra_args,
        )

    def trace_folder(self) -> tuple[Path, str]:
        """Where Triton writes request traces (labkit.timeline): the folder here, and its path as
        Triton sees it (launchers that run Triton elsewhere mount it there)."""
        folder = self.workdir / "traces"
        return folder, str(folder)

    def toolchain(self) -> Toolchain:
        """Where C++ backends for this server are compiled: g++ here; launchers that run Triton
        elsewhere compile there, so the library links the C++ runtime it will run with."""
        if self._toolchain is None:
            self._toolchain = LocalToolchain()
        return self._toolchain

    # -- lifecycle ------------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._launched and not self._stopped and self._process_running()

    def start(self, timeout_s: float = 60.0) -> "TritonServer":
        """Launch Triton and wait until it is ready. A failed start leaves nothing running."""
        global _current
        for attempt in range(1, self.launch_attempts + 1):
            try:
                self.run_id = uuid.uuid4().hex
                self._log_start = self.logs.mark()
                self._launch()
                self._launched = True
                _LIVE.add(self)
                self._wait_ready(timeout_s)
                break
            except ServerStartError:
                self._end_process()
                if attempt < self.launch_attempts and self._retry_launch():
                    continue
                self.stop()
                raise
            except BaseException:
                self.stop()
                raise
        _current = self
        self.started_seq = next(_servers_started)  # current() falls back to the latest one still running
        self._watchdog = threading.Thread(target=self._watch, name="labkit-watchdog", daemon=True)
        self._watchdog.start()
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self._process_running():
                summary = self._exit_summary()
                raise ServerStartError(
                    f"Triton ({self.describe()}) exited during start-up{f' ({summary})' if summary else ''}; "
                    f"see {self.logs.path}.", self._failure_tail(),
                )
            if self.ready():
                return
            time.sleep(0.05)
        raise ServerStartError(
            f"Triton ({self.describe()}) was not ready after {timeout_s:.0f} s; raise timeout_s or read {self.logs.path}.",
            self._failure_tail(),
        )

    def _watch(self) -> None:
        # Notice a crash within a fraction of a second, not at the next request: say so once.
        while not self._stopped:
            if not self.alive:
                if self._stopped:
                    return
                self._after_death()
                self.died = self.exited_error("Triton stopped unexpectedly")
                busy = ", ".join(sorted(m for m, n in self._in_flight.items() if n > 0))
                where = f"\n{self.died.crash}" if self.died.crash else ""
                print(
                    f"labkit: Triton ({self.kind}) exited: {self._exit_summary() or 'unknown reason'}"
                    f"{f'; requests to {busy} were in flight' if busy else ''}. "
                    f"Call .restart() to start it again with the same models.{where}",
                    file=sys.stderr, flush=True,
                )
                return
            time.sleep(0.1)

    def restart(self, timeout_s: float = 60.0) -> list[str]:
        """Start Triton again on the same repository and load the models that were loaded (e.g. after
        a backend crashed the server). Returns those models."""
        models = sorted(self._loaded)
        # This exit is wanted: the watchdog of the launch that ends must not report it (or, seeing
        # the process gone, end the stubs of the next one), so it goes first.
        self._stopped = True
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join()
        self._end_process()
        self._close_clients()  # they talk to the old ports
        self._in_flight.clear()
        self._stopped = False
        self.died = None
        self.start(timeout_s)
        for model in models:
            self.load(model)
        return models

    def stop(self) -> None:
        """Stop the server and everything it started. Safe to call twice."""
        global _current
        if self._stopped:
            return
        self._stopped = True
        _LIVE.discard(self)
        if _current is self:
            _current = None
        died_on_its_own = self._launched and not self._process_running()
        if self._launched and not died_on_its_own:
            self._unload_all(STOP_UNLOAD_S)  # the models' finalize; then ending the process loses nothing
        self._end_process()
        self._close_clients()
        if self._own_workdir and not died_on_its_own:  # keep the log of a crash for reading
            shutil.rmtree(self.workdir, ignore_errors=True)

    def track_request(self, model: str, delta: int) -> None:
        """Count requests in flight per model, so a crash report can name what was executing."""
        if delta < 0 and not self.alive:
            return  # keep the picture of the moment it died for the crash report
        with self._clients_lock:
            self._in_flight[model] = self._in_flight.get(model, 0) + delta

    def __enter__(self) -> "TritonServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"<{type(self).__name__} {state} http={self.http_url} grpc={self.grpc_url}>"

    # -- a server that died ------------------------------------------------------------------------------

    def gone(self, within_s: float = 1.0) -> bool:
        """Whether the server has died; a failed connection may come just before the process is reaped."""
        deadline = time.monotonic() + within_s
        while self.alive:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def exited_error(self, doing: str) -> ServerNotRunningError:
        """The error for an operation that failed because the server is gone: why, where a C++ backend
        crashed (its source lines) if one did, and the last log lines."""
        detail = self._exit_summary()
        tail = self._failure_tail()  # first: a container's last log lines are copied in by then
        report = str(self.crash() or "")
        message = f"{doing}: the Triton server has exited{f' ({detail})' if detail else ''}."
        return ServerNotRunningError(f"{message}\n{report}" if report else message, tail, crash=report)

    def crash(self) -> Crash | None:
        """How a C++ backend brought the server down (signal, uncaught exception, source lines), read
        from this launch's log; None while it runs or when no backend crash is reported."""
        if self.alive:
            return None
        if self._crash is None or self._crash[0] != self.run_id:
            self._crash = (self.run_id, read_crash(self.logs.since(self._log_start), self._host_path))
        return self._crash[1]

    def dead_server_error(self, exc: BaseException, doing: str) -> ServerNotRunningError | None:
        """``exc`` (raised by a client call) explained as a stopped or dead server, or None while the
        server lives. The one place that decides "the server died"."""
        if self._stopped and self.died is None:
            return ServerNotRunningError(f"{doing}: this server was stopped; start a new one.")
        return self.exited_error(doing) if self.gone(1.0 if unreachable(exc) else 0.0) else None

    # -- addresses and clients ------------------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        """host:port as tritonclient takes it (no scheme)."""
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def urls(self) -> dict[str, str]:
        return {"http": f"http://{self.http_url}", "grpc": f"grpc://{self.grpc_url}", "metrics": self.metrics_url}

    def client(self, protocol: str = "http", *, network_timeout_s: float = 60.0) -> Any:
        """A new tritonclient client. They are not thread-safe: make one per thread.
        ``network_timeout_s``: how long an HTTP client waits on its socket (labkit's own calls wait
        with their time limit instead, and give a longer one)."""
        if protocol == "http":
            return httpclient.InferenceServerClient(self.http_url, network_timeout=network_timeout_s)
        if protocol == "grpc":
            return grpcclient.InferenceServerClient(self.grpc_url)
        raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}")

    def _control(self) -> httpclient.InferenceServerClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = httpclient.InferenceServerClient(self.http_url, network_timeout=600.0)
            self._local.client = client
            with self._clients_lock:
                self._clients.append(client)
        return client

    def _close_clients(self) -> None:
        with self._clients_lock:
            clients, self._clients = self._clients, []
            self._local = threading.local()
        for client in clients:
            try:
                client.close()
            except Exception:  # a client of another thread may refuse; the process cleans it up
                pass

    def _call(
        self, what: str, fn: Callable[[Any], Any],
        refused: Callable[[InferenceServerException], LabkitError] | None = None,
    ) -> Any:
        """Run a control-plane call on this thread's HTTP client. A dead server, Triton's refusal
        (``refused`` makes the error) and a failed connection all become labkit errors."""
        if self._stopped:
            raise ServerNotRunningError(f"Cannot {what}: this server was stopped; start a new one.")
        try:
            return fn(self._control())
        except (InferenceServerException, *CONNECTION_ERRORS) as exc:
            dead = self.dead_server_error(exc, f"Cannot {what}")
            if dead is not None:
                raise dead from None
            if isinstance(exc, InferenceServerException):
                raise (refused(exc) if refused else ServerError(f"Cannot {what}: Triton refused: {exc.message()}")) from None
            raise ServerError(f"Cannot {what}: Triton did not answer ({exc!r}); see server.logs.tail().") from None

    # -- health ---------------------------------------------------------------------------------------------

    def ready(self) -> bool:
        if not self.alive:
            return False
        try:
            return bool(self._control().is_server_ready())
        except Exception:  # not listening yet
            return False

    @property
    def version(self) -> str:
        return self._call("read the server metadata", lambda c: c.get_server_metadata()["version"])
