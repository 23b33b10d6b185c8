"""What every labkit server offers, whichever way Triton runs: URLs, readiness, logs, models, clients."""

from __future__ import annotations

import atexit
import http.client
import re
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from abc import ABC, abstractmethod
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from ..errors import (
    ModelLoadError,
    RepositoryError,
    ServerNotRunningError,
    ServerStartError,
)
from ..repository import ModelConfig, ModelRepository, check_name
from ..repository.python_source import model_source
from ..repository.files import write_atomic
from .logs import LogView

if TYPE_CHECKING:
    from ..native.build import Build

_LIVE: "weakref.WeakSet[TritonServer]" = weakref.WeakSet()

#: What tritonclient's HTTP client raises when the server is gone: a refused connection (OSError)
#: or one closed mid-response (http.client.HTTPException, from geventhttpclient).
CONNECTION_ERRORS = (OSError, http.client.HTTPException)
_current: "TritonServer | None" = None


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


def current() -> "TritonServer":
    """The server started last in this process (what the notebook magics talk to)."""
    if _current is None or not _current.alive:
        raise ServerNotRunningError("No labkit server is running; start one with `lab = labkit.start()`.")
    return _current


# Lines worth showing when a load fails: Python tracebacks, errors, and the model's own lines.
_REASON = re.compile(r"Traceback|Error|error|line \d+|^E\d{4}|^  ")


class TritonServer(ABC):
    """A running Triton 23.12. Use as a context manager, or call ``stop()``; exit stops it anyway."""

    host = "127.0.0.1"
    kind = "abstract"

    def __init__(self, repository: ModelRepository, log_path: Path, backend_dir: Path) -> None:
        self.repository = repository
        self.logs = LogView(log_path)
        self.backend_dir = backend_dir
        self.http_port = self.grpc_port = self.metrics_port = 0
        # tritonclient's HTTP client runs on gevent and cannot cross threads: one per thread.
        self._local = threading.local()
        self._clients: list[httpclient.InferenceServerClient] = []
        self._clients_lock = threading.Lock()
        self._stopped = False
        #: Called with a model's name just before labkit (re)loads it, e.g. so a statistics
        #: collector can read the counters a reload is about to reset.
        self.before_load: list[Callable[[str], None]] = []
        self._loaded: set[str] = set()  # what restart() brings back
        self._in_flight: dict[str, int] = {}
        #: Set (to the error) when the watchdog sees the server die on its own.
        self.died: ServerNotRunningError | None = None
        #: Backend library paths this server process has loaded; Triton never reloads those.
        self.loaded_libraries: set[str] = set()

    # -- lifecycle (launchers implement the underscored parts) -------------------------------

    @abstractmethod
    def _launch(self) -> None: ...

    @abstractmethod
    def _end_process(self) -> None:
        """End Triton (its process or container) and keep the files."""

    @abstractmethod
    def _terminate(self) -> None:
        """End Triton for good: the process, then what the launcher created for it."""

    @property
    @abstractmethod
    def alive(self) -> bool: ...

    def start(self, timeout_s: float = 60.0) -> "TritonServer":
        global _current
        self._launch()
        _LIVE.add(self)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        _current = self
        self._watchdog = threading.Thread(target=self._watch, name="labkit-watchdog", daemon=True)
        self._watchdog.start()
        return self

    def _watch(self) -> None:
        # Notice a crash within a fraction of a second, not at the next request: say so once.
        while not self._stopped:
            if not self.alive:
                if self._stopped:
                    return
                self.died = self.exited_error("Triton stopped unexpectedly")
                busy = ", ".join(sorted(m for m, n in self._in_flight.items() if n > 0))
                print(
                    f"labkit: Triton ({self.kind}) exited: {self._exit_summary() or 'unknown reason'}"
                    f"{f'; requests to {busy} were in flight' if busy else ''}. "
                    f"Call .restart() to start it again with the same models.",
                    file=sys.stderr, flush=True,
                )
                return
            time.sleep(0.1)

    def restart(self, timeout_s: float = 60.0) -> list[str]:
        """Start Triton again on the same repository and load the models that were loaded (e.g. after
        a backend crashed the server). Returns those models."""
        models = sorted(self._loaded)
        self._end_process()
        self._close_clients()  # they talk to the old ports
        self._in_flight.clear()
        self._stopped = False
        self.died = None
        self.loaded_libraries.clear()  # a new process: every library path is fresh again
        self.start(timeout_s)
        for model in models:
            self.load(model)
        return models

    def track_request(self, model: str, delta: int) -> None:
        """Count requests in flight per model, so a crash report can name what was executing."""
        if delta < 0 and not self.alive:
            return  # keep the picture of the moment it died for the crash report
        with self._clients_lock:
            self._in_flight[model] = self._in_flight.get(model, 0) + delta

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                raise ServerStartError(f"Triton ({self.kind}) exited during start-up; see {self.logs.path}.", self.logs.tail(25))
            if self.ready():
                return
            time.sleep(0.05)
        raise ServerStartError(
            f"Triton ({self.kind}) was not ready after {timeout_s:.0f} s; raise timeout_s or read {self.logs.path}.",
            self.logs.tail(25),
        )

    def stop(self) -> None:
        """Stop the server and everything it started. Safe to call twice."""
        global _current
        if self._stopped:
            return
        self._stopped = True
        _LIVE.discard(self)
        if _current is self:
            _current = None
        self._terminate()
        self._close_clients()

    def _close_clients(self) -> None:
        with self._clients_lock:
            clients, self._clients = self._clients, []
            self._local = threading.local()
        for client in clients:
            try:
                client.close()
            except Exception:  # a client of another thread may refuse; the process cleans it up
                pass

    def __enter__(self) -> "TritonServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"<{type(self).__name__} {state} http={self.http_url} grpc={self.grpc_url}>"

    # -- addresses and clients ------------------------------------------------------------------

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
        return {
            "http": f"http://{self.http_url}",
            "grpc": f"grpc://{self.grpc_url}",
            "metrics": self.metrics_url,
        }

    def client(self, protocol: str = "http") -> Any:
        """A new tritonclient client. They are not thread-safe: make one per thread."""
        if protocol == "http":
            return httpclient.InferenceServerClient(self.http_url)
        if protocol == "grpc":
            return grpcclient.InferenceServerClient(self.grpc_url)
        raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}")

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a control-plane call on the shared HTTP client, turning a dead server into a clear error."""
        if self._stopped:
            raise ServerNotRunningError(f"Cannot {what}: this server was stopped; start a new one.")
        try:
            return fn(self._control(), *args, **kwargs)
        except InferenceServerException:
            if not self.alive:
                raise self.exited_error(f"Cannot {what}") from None
            raise
        except CONNECTION_ERRORS:
            if self.gone():
                raise self.exited_error(f"Cannot {what}") from None
            raise

    def gone(self, within_s: float = 1.0) -> bool:
        """Whether the server has died; a failed connection may come just before the process is reaped."""
        deadline = time.monotonic() + within_s
        while self.alive:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def exited_error(self, doing: str) -> ServerNotRunningError:
        """The error for an operation that failed because the server is gone: why, and its last log lines."""
        detail = self._exit_summary()
        return ServerNotRunningError(
            f"{doing}: the Triton server has exited{f' ({detail})' if detail else ''}.", self._failure_tail()
        )

    def _exit_summary(self) -> str:
        """How the server ended, e.g. "exit code 137"; launchers that know say so."""
        return ""

    def _failure_tail(self) -> str:
        return self.logs.tail(25)

    def _control(self) -> httpclient.InferenceServerClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = httpclient.InferenceServerClient(self.http_url, network_timeout=600.0)
            self._local.client = client
            with self._clients_lock:
                self._clients.append(client)
        return client

    # -- health ----------------------------------------------------------------------------------

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

    # -- models ----------------------------------------------------------------------------------

    def index(self) -> list[dict]:
        """Every model in the repository with its state, as Triton reports it."""
        return self._call("read the repository index", lambda c: c.get_model_repository_index())

    def loaded_models(self) -> list[str]:
        return sorted({m["name"] for m in self.index() if m.get("state") == "READY"})

    def load(self, name: str) -> None:
        """Load (or reload) a model from the repository. A failure raises ModelLoadError with Triton's reason."""
        check_name(name)
        if not (self.repository.model_dir(name) / "config.pbtxt").exists():
            raise RepositoryError(f"Model {name!r} has no config.pbtxt in {self.repository.root}; write one first.")
        self.repository.read_config(name)  # a typo in a field fails here, named, before Triton sees it
        for listener in list(self.before_load):
            listener(name)
        mark = self.logs.mark()
        try:
            self._call(f"load model {name!r}", lambda c: c.load_model(name))
        except InferenceServerException as exc:
            raise ModelLoadError(self._load_failure(name, exc.message(), mark)) from None
        self._loaded.add(name)

    def _load_failure(self, name: str, reason: str, mark: int) -> str:
        time.sleep(0.1)  # the stub's traceback can land in the log just after the HTTP answer
        lines = [
            line for line in self.logs.since(mark).splitlines()
            if _REASON.search(line) and "<frozen importlib" not in line
        ]
        detail = "\n".join(lines[-20:])
        still = ", ".join(self.loaded_models()) or "none"
        text = f"Triton could not load model {name!r}:\n{reason}"
        if detail:
            text += f"\n--- server log during the load ---\n{detail}"
        return text + f"\nFix the model and load it again. Models still serving: {still}."

    def unload(self, name: str, timeout_s: float = 30.0) -> None:
        """Unload and wait until Triton has finished (its unload call returns before that)."""
        check_name(name)
        self._call(f"unload model {name!r}", lambda c: c.unload_model(name))
        self._loaded.discard(name)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = [m.get("state") for m in self.index() if m["name"] == name]
            if not any(s in ("READY", "UNLOADING", "LOADING") for s in states):
                return
            time.sleep(0.02)
        raise ModelLoadError(f"Model {name!r} was still unloading after {timeout_s:.0f} s; see server.logs.tail().")

    def is_model_ready(self, name: str) -> bool:
        return bool(self._call("ask about a model", lambda c: c.is_model_ready(name)))

    def model_config(self, name: str) -> dict:
        """The config Triton is using for a loaded model (JSON form)."""
        return self._call(f"read the config of {name!r}", lambda c: c.get_model_config(name))

    def stats(self, name: str = "") -> dict:
        """Triton's statistics for one model (or all): counts, batch_stats and cumulative times in ns."""
        return self._call("read statistics", lambda c: c.get_inference_statistics(name))

    def metrics_text(self, timeout_s: float = 5.0) -> str:
        """The Prometheus text from /metrics (its service starts a moment after HTTP is ready)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
                    return resp.read().decode()
            except urllib.error.URLError:
                if not self.alive or time.monotonic() > deadline:
                    raise ServerNotRunningError(f"The metrics endpoint {self.metrics_url} does not answer.") from None
                time.sleep(0.05)

    # -- Python backends written from a notebook -------------------------------------------------

    def python_model(
        self,
        name: str,
        source: str | Path | type,
        config: ModelConfig | None = None,
        *,
        load: bool = True,
    ) -> Path:
        """Write ``name/1/model.py`` (and the config, if given), then load or reload it.

        Reloading replaces the model's Python stub, so the new code serves without restarting Triton.
        """
        check_name(name)
        if config is not None:
            if config.name != name:
                raise RepositoryError(f"The config is for model {config.name!r}, not {name!r}.")
            self.repository.write_config(config)
        path = self.repository.write_python_model(name, source)
        if load:
            self.load(name)
        return path

    # -- C++ backends compiled from a notebook ---------------------------------------------------

    def build(self, backend: str, source: str | Path, **options: Any) -> "Build":
        """Compile a C++ backend for this server (launchers that run elsewhere compile there)."""
        from ..native.build import build_backend

        return build_backend(backend, source, **options)

    def cpp_backend(
        self, backend: str, source: str | Path, models: list[str] | None = None, **options: Any
    ) -> dict[str, int]:
        """Build ``libtriton_<backend>.so`` and (re)load every model that uses it (or ``models``).

        Returns the version each model now serves. A compile error raises BuildError and changes
        nothing; a model Triton refuses raises ModelLoadError and keeps its previous build serving.
        """
        from ..native import deploy

        build = self.build(backend, source, **options)
        targets = models if models is not None else self.repository.models_using(backend)
        return {model: deploy.install(self, build, model) for model in targets}

    def python_backend(self, backend: str, source: str | Path | type, *, reload: bool = True) -> list[str]:
        """Write a Python-based backend: one ``backends/<backend>/model.py`` that serves many models
        (configs saying ``backend: "<backend>"``). With ``reload``, every loaded model that uses it is
        reloaded so the new code serves; returns those models."""
        check_name(backend, "backend")
        if backend == "python":
            raise RepositoryError("'python' is the Python backend itself; give your backend another name.")
        write_atomic(self.backend_dir / backend / "model.py", model_source(source))
        if not reload:
            return []
        loaded = set(self.loaded_models())
        users = [m for m in self.repository.models_using(backend) if m in loaded]
        for model in users:
            self.repository.mark_changed(model)  # the model folder itself did not change
            self.load(model)
        return users
