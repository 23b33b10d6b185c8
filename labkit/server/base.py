"""TritonServer: one running Triton 23.12, whichever way it runs, as a thin facade over components.

    config    ServerConfig   what the person chose (frozen); Triton's command line is rendered from it
    runtime   Runtime        where Triton runs (embedded process, Docker container) and tools beside it
    health    Health         launch state, crash watchdog, "the server died" as an error
    models    Models         load, unload, Python and C++ backends, statistics (holds runtime + client)
    endpoints Endpoints      where it answers

A launcher (``labkit/server/launchers/<kind>.py``) provides a Runtime and a TritonServer subclass
that only builds it. The facade owns the lifecycle (start, stop, restart) and delegates the rest.
"""

from __future__ import annotations

import atexit
import itertools
import weakref
from pathlib import Path
from typing import Any

from ..errors import ServerNotRunningError, ServerStartError, WaitTimeoutError
from ..native.crash import Crash
from ..plumbing.endpoints import Endpoints
from ..plumbing.polling import wait_until
from ..repository import ModelConfig, ModelRepository
from .control import ControlPlane
from .health import Health
from .logs import LogView
from .model_control import Models
from .runtime import Runtime, RuntimeDefaults, Workspace
from .server_config import ServerConfig

_LIVE: weakref.WeakSet[TritonServer] = weakref.WeakSet()

#: How long stop() waits for the models to unload (a Python model takes about 1 s in 23.12) before it
#: ends the server anyway: a stuck model never finishes, and Triton's own exit would wait for it.
STOP_UNLOAD_S = 1.5
EXIT_GRACE_S = 5.0  # how long an idle Triton may take to exit on its own before it is killed

_current: TritonServer | None = None
_servers_started = itertools.count(1)


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


def current() -> TritonServer:
    """The server started last in this process that still runs (what the notebook magics talk to):
    after ``lab2.stop()``, ``lab`` again."""
    if _current is not None and _current.alive:
        return _current
    running = [s for s in list(_LIVE) if s.alive]
    if not running:
        raise ServerNotRunningError(
            reason="no labkit server is running", remedy="start one with `lab = labkit.start()`"
        )
    return max(running, key=lambda s: s._started_seq)


def compose(
    runtime_type: type[RuntimeDefaults],
    repository: str | Path | None,
    workdir: str | Path | None,
    options: dict[str, Any],
) -> tuple[Runtime, ServerConfig]:
    """A launcher's runtime and config from the keywords a person gives its server: ServerConfig's
    options go to the config, the rest to the runtime (which refuses what it does not know)."""
    config, runtime_options = ServerConfig.split(options)
    workspace = Workspace.create(runtime_type.kind, repository, workdir)
    try:
        return runtime_type(workspace, **runtime_options), config  # type: ignore[return-value]
    except BaseException:
        workspace.remove()  # nothing is left of a server that could not be made
        raise


class TritonServer:
    """A running Triton 23.12. Use as a context manager, or call ``stop()``; exit stops it anyway.

    ``config`` holds the options (see ServerConfig: time limits, auto-complete, extra arguments); the
    components hold the rest: ``runtime`` (where Triton runs), ``models`` (every model call),
    ``health`` (crashes), ``endpoints`` (URLs). The most used model calls are here too.
    """

    # A misspelt or retired option set on a server (``lab.load_timeout_s = 5``) must fail, not be ignored.
    __slots__ = ("runtime", "health", "models", "_control", "_started_seq", "__weakref__")

    def __init__(self, runtime: Runtime, config: ServerConfig | None = None) -> None:
        self.runtime = runtime
        self.health = Health(runtime)
        self._control = ControlPlane(self.health)
        self.models = Models(runtime, self._control, config or ServerConfig())
        self._started_seq = 0  # set by each start(): which server current() falls back to

    # -- components and what they hold --------------------------------------------------------------------

    @property
    def config(self) -> ServerConfig:
        return self.models.config

    @config.setter
    def config(self, value: ServerConfig) -> None:
        """A new config takes effect for the next call (time limits) or the next start (Triton's options)."""
        self.models.config = value

    @property
    def workspace(self) -> Workspace:
        return self.runtime.workspace

    @property
    def repository(self) -> ModelRepository:
        return self.runtime.workspace.repository

    @property
    def logs(self) -> LogView:
        return self.runtime.workspace.logs

    @property
    def endpoints(self) -> Endpoints:
        return self._control.endpoints

    def client(self, protocol: str = "http", *, network_timeout_s: float = 60.0) -> Any:
        """A new tritonclient client for this server. They are not thread-safe: make one per thread.
        An HTTP one is a ``labkit.plumbing.transport.HttpClient``: it closes once, so any thread may release it."""
        return self._control.client(protocol, network_timeout_s=network_timeout_s)

    # -- lifecycle ------------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.health.alive

    def ready(self) -> bool:
        return self.alive and self._control.ready()

    def start(self, timeout_s: float = 60.0) -> TritonServer:
        """Launch Triton and wait until it is ready. A failed start leaves nothing running."""
        global _current
        for attempt in range(1, self.runtime.launch_attempts + 1):
            try:
                self.health.log_start = self.logs.mark()
                self._control.endpoints = self.runtime.launch(self.config)
                self.health.launched = True
                _LIVE.add(self)
                self._wait_ready(timeout_s)
                break
            except ServerStartError:
                self.runtime.end()
                if attempt < self.runtime.launch_attempts and self.runtime.retry_launch():
                    continue
                self.stop()
                raise
            except BaseException:
                self.stop()
                raise
        _current = self
        self._started_seq = next(_servers_started)  # current() falls back to the latest one still running
        self.health.watch()
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        def ready() -> bool:
            if not self.runtime.running():
                summary = self.runtime.exit_summary()
                raise ServerStartError(
                    doing=f"Triton ({self.runtime.describe()}) did not start",
                    reason="it exited during start-up",
                    exit_summary=summary or "exited",
                    log_tail=self.runtime.failure_tail(),
                    remedy=f"see {self.logs.path}",
                )
            return self._control.ready()

        try:
            wait_until(ready, timeout_s, "Triton to be ready", interval_s=0.05)
        except WaitTimeoutError:
            raise ServerStartError(
                doing=f"Triton ({self.runtime.describe()}) did not start",
                reason=f"it was not ready after {timeout_s:.0f} s",
                log_tail=self.runtime.failure_tail(),
                remedy=f"raise timeout_s or read {self.logs.path}",
            ) from None

    def restart(self, timeout_s: float = 60.0) -> list[str]:
        """Start Triton again on the same repository and load the models that were loaded (e.g. after
        a backend crashed the server). Returns those models."""
        models = self.models.to_restore()
        # This exit is wanted: the watchdog of the launch that ends must not report it (or, seeing
        # the process gone, end the stubs of the next one), so it goes first.
        self.health.unwatch()
        self.runtime.end()
        self._control.close()  # they talk to the old ports
        self.health.relaunch()
        self.start(timeout_s)
        for model in models:
            self.load(model)
        return models

    def stop(self, keep_log: bool = False) -> None:
        """Stop the server and everything it started. Safe to call twice. ``keep_log``: the work folder
        labkit made is removed all but the log, which stays at ``logs.path`` (``labkit serve`` does so)."""
        global _current
        if self.health.stopped:
            return
        self.health.stopped = True
        _LIVE.discard(self)
        if _current is self:
            _current = None
        launched = self.health.launched
        died_on_its_own = launched and not self.runtime.running()
        unloaded = launched and not died_on_its_own and self.models.unload_all(STOP_UNLOAD_S)  # models' finalize
        # With nothing loaded Triton exits in under a second; its backends' finalize runs then
        # (python_backend removes the /tmp/python_env_* folder it made, with any unpacked environment).
        self.runtime.end(grace_s=EXIT_GRACE_S if unloaded else 0.0)
        self._control.close()
        if not died_on_its_own:  # keep the log of a crash for reading
            self.workspace.remove(keep_log)

    def crash(self) -> Crash | None:
        """How a C++ backend brought the server down (signal, uncaught exception, source lines); None
        while it runs or when no backend crash is reported."""
        return self.health.crash()

    @property
    def version(self) -> str:
        return self._control.call("read the server metadata", lambda c: c.get_server_metadata()["version"])

    # -- the model calls used most (the rest: server.models) -----------------------------------------------

    def load(self, name: str, *, timeout_s: float | None = None) -> None:
        """See Models.load."""
        self.models.load(name, timeout_s=timeout_s)

    def unload(self, name: str, timeout_s: float = 30.0) -> None:
        """See Models.unload."""
        self.models.unload(name, timeout_s)

    def loaded_models(self) -> list[str]:
        return self.models.loaded_models()

    def model_config(self, name: str) -> dict:
        """The config Triton is using for a loaded model (JSON form)."""
        return self.models.model_config(name)

    def stats(self, name: str = "") -> dict:
        """Triton's statistics for one model (or all)."""
        return self.models.stats(name)

    def python_model(
        self,
        name: str,
        source: str | Path | type,
        config: ModelConfig | None = None,
        *,
        load: bool = True,
        load_timeout_s: float | None = None,
    ) -> Path:
        """See Models.python_model."""
        return self.models.python_model(name, source, config, load=load, load_timeout_s=load_timeout_s)

    def python_backend(self, backend: str, source: str | Path | type, *, reload: bool = True) -> list[str]:
        """See Models.python_backend."""
        return self.models.python_backend(backend, source, reload=reload)

    def cpp_backend(
        self, backend: str, source: str | Path | list[str | Path], models: list[str] | None = None, **options: Any
    ) -> dict[str, int]:
        """See Models.cpp_backend."""
        return self.models.cpp_backend(backend, source, models, **options)

    def unstick(self, name: str) -> str:
        """See Models.unstick."""
        return self.models.unstick(name)

    def __enter__(self) -> TritonServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"<{type(self).__name__} {state} http={self.endpoints.http_url} grpc={self.endpoints.grpc_url}>"
