"""The models of a labkit server: Triton's repository API (load, unload, index, configs, statistics)
and backends written from a notebook (Python models, Python-based backends, C++).

``Models`` is a component: it holds the server's runtime (where Triton runs, tools beside it), its
control plane (the HTTP client calls) and its config (time limits), and nothing else of the server.
"""

from __future__ import annotations

import math
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tritonclient.utils import InferenceServerException

from ..errors import (
    InvalidNameError,
    LabkitError,
    MissingConfigError,
    ModelLoadError,
    RepositoryError,
    ServerNotRunningError,
    TraceError,
    WaitTimeoutError,
)
from ..native import deploy
from ..native.build import Build, BuildOptions, build_backend
from ..native.export import export_backend
from ..native.sources import collect
from ..plumbing.pending import POLL_S, SOCKET_TIMEOUT_S, HttpPending, Pending
from ..plumbing.polling import wait_until
from ..repository import ModelConfig, ModelRepository, check_name
from ..repository.files import write_atomic
from ..repository.python_source import model_source
from ..stuck import unstick as _unstick
from ..stuck.stuck_load import load_timeout
from . import env_checks, idle, refusals, stubs
from .attempts import Attempt, digest, recording
from .connection import CONNECTION_ERRORS
from .control import ControlPlane
from .runtime import Runtime, Workspace
from .server_config import ServerConfig

# Lines worth showing when a load fails: Python tracebacks, errors, and the model's own lines.
_REASON = re.compile(r"Traceback|Error|error|line \d+|^E\d{4}|^  ")


class Models:
    """Load, unload and inspect models; write Python and C++ backends and serve them at once."""

    def __init__(self, runtime: Runtime, control: ControlPlane, config: ServerConfig) -> None:
        self.runtime = runtime
        self.control = control
        self.config = config
        #: Called with a model's name just before labkit (re)loads it, e.g. so a statistics
        #: collector can read the counters a reload is about to reset.
        self.before_load: list[Callable[[str], None]] = []
        #: Per model or backend, what became of the latest source written for it (see attempts.py).
        self.attempts: dict[str, Attempt] = {}
        self._loaded: set[str] = set()  # what a restart brings back
        #: The latest build of each backend made through this server: what its export takes (the machine's
        #: build cache is shared by every lab and kernel, so its most recent build may be another lab's).
        self._builds: dict[str, Build] = {}

    @property
    def workspace(self) -> Workspace:
        return self.runtime.workspace

    @property
    def repository(self) -> ModelRepository:
        return self.runtime.workspace.repository

    @property
    def alive(self) -> bool:
        return self.control.health.alive

    def to_restore(self) -> list[str]:
        """The models labkit loaded (and did not unload): what a restart loads again."""
        return sorted(self._loaded)

    def _call(
        self,
        what: str,
        fn: Callable[[Any], Any],
        refused: Callable[[InferenceServerException], LabkitError] | None = None,
    ) -> Any:
        return self.control.call(what, fn, refused)

    def _let_backend_threads_settle(self) -> None:
        """Before Triton deletes a model (unload, or a reload replacing it): see labkit.server.idle."""
        threads = self.runtime.triton_threads()
        if threads is not None:
            idle.wait_idle(threads)

    # -- models --------------------------------------------------------------------------------------------

    def index(self) -> list[dict]:
        """Every model in the repository with its state, as Triton reports it."""
        return self._call("read the repository index", lambda c: c.get_model_repository_index())

    def loaded_models(self) -> list[str]:
        return sorted({m["name"] for m in self.index() if m.get("state") == "READY"})

    def load(self, name: str, *, timeout_s: float | None = None) -> None:
        """Load (or reload) a model from the repository. A failure raises ModelLoadError with Triton's reason.

        ``timeout_s``: how long the load may take (default: the server's ``load_timeout_s``; ``math.inf``
        or 0 for no limit). Past it, LoadTimeoutError says where the model's initialization is stuck;
        a stuck Python ``initialize`` is ended first, so the fixed model.py loads in the same server.
        A kernel interrupt while waiting does the same (the error's ``interrupted`` is then True)."""
        check_name(name)
        if (self.repository.model_dir(name) / "config.pbtxt").exists():
            self.repository.read_config(name)  # a typo in a field fails here, named, before Triton sees it
        elif not (self.config.auto_complete and self.repository.versions(name)):
            # With auto-complete on, Triton asks the backend for the config (auto_complete_config).
            raise MissingConfigError(
                model=name,
                source=str(self.repository.model_dir(name) / "config.pbtxt"),
                remedy="write one first (or start the server with auto_complete=True)",
            )
        refusals.check_metric_kinds(self, name)  # before Triton: its refusal can crash 23.12
        env_checks.check_environment(self, name)  # a wrong Python or numpy 2 would load and then fail
        for listener in list(self.before_load):
            listener(name)
        limit = self.config.load_timeout_s if timeout_s is None else timeout_s
        limit = math.inf if not limit or limit <= 0 else float(limit)
        mark, since = self.workspace.logs.mark(), time.time()
        self._let_backend_threads_settle()  # a reload deletes the model it replaces
        self._call(
            f"load model {name!r}",
            lambda _: self._load_within(name, limit),
            refused=lambda exc: self._load_failure(name, exc, mark, since),
        )
        self._loaded.add(name)

    def _load_within(self, name: str, limit_s: float) -> None:
        """Triton's load call, waited for in short steps on a client of its own (a stuck load is then
        ended while the call is under way, and its answer read)."""
        client = self.control.client("http", network_timeout_s=SOCKET_TIMEOUT_S)
        pending = HttpPending(lambda: client.load_model(name))
        try:
            started, interrupted = time.monotonic(), False
            try:
                while not pending.wait(POLL_S):
                    if time.monotonic() - started > limit_s:
                        break
                else:
                    pending.result()
                    return
            except KeyboardInterrupt:  # the person gave up waiting: end the load as at its limit
                interrupted = True
            # The stuck load holds one of Triton's HTTP threads, and keep-alive connections that
            # thread serves wait with it (seen with a C++ ModelInitialize): connect afresh.
            self.control.close()
            raise load_timeout(
                self,
                name,
                limit_s,
                pending.wait,
                lambda: _refusal(pending),
                interrupted_after=time.monotonic() - started if interrupted else None,
            )
        finally:
            pending.cancel()
            client.close()

    def _load_failure(self, name: str, exc: InferenceServerException, mark: int, since: float) -> ModelLoadError:
        reason = exc.message() or str(exc)
        self.workspace.logs.settle()  # the stub's traceback can land in the log just after the HTTP answer
        lines = [
            line
            for line in self.workspace.logs.since(mark).splitlines()
            if _REASON.search(line) and "<frozen importlib" not in line
        ]
        detail = "\n".join(lines[-20:])
        # A config Triton cannot read fails the repository poll: its answer says only that, its log says why.
        polled = re.search(rf"Poll failed for model directory '{re.escape(name)}': (.+)", detail)
        if polled and "failed to poll" in reason:
            reason = f"{reason}: {polled.group(1).strip()}"
        ended = stubs.exits(self.workspace.backend_dir / "python", name, since)
        serving = self.loaded_models()
        remedy = "Fix the model and load it again"
        if ("unable to find" in reason and "backend" in reason) or "libtriton_" in reason:
            remedy = (
                "Triton found no library for the model's backend: put libtriton_<backend>.so in the model's "
                "version folder, or serve a folder of built backends (labkit serve --backend-directory DIR, "
                "labkit.start(backend_directory=DIR)); then load it again"
            )
        refusal = ModelLoadError(
            model=name,
            happened="could not be loaded by Triton",
            reason=reason,
            # the stub ended itself: say how and where, its own last lines say the rest
            detail=stubs.describe(ended) if ended else detail,
            serving=serving,
            remedy=remedy,
        )
        error = refusals.explain(self, name, refusal)
        return env_checks.missing_module(self, name, error) or error

    def unload(self, name: str, timeout_s: float = 30.0) -> None:
        """Unload and wait until Triton has finished (its unload call returns before that)."""
        check_name(name)
        self._let_backend_threads_settle()
        self._call(f"unload model {name!r}", lambda c: c.unload_model(name))
        self._loaded.discard(name)
        try:
            wait_until(
                lambda: (
                    not any(
                        m.get("state") in ("READY", "UNLOADING", "LOADING") for m in self.index() if m["name"] == name
                    )
                ),
                timeout_s,
                f"model {name!r} to unload",
            )
        except WaitTimeoutError:
            raise ModelLoadError(
                model=name,
                happened=f"was still unloading after {timeout_s:.0f} s",
                reason="still unloading",
                remedy="see server.logs.tail()",
            ) from None

    def unload_all(self, within_s: float) -> bool:
        """Ask Triton to unload every ready model and wait up to ``within_s`` for it, so that each
        model's finalize runs before stop() ends the process; whether every model was unloaded. Best
        effort: a server that does not answer, or a model that does not finish, is ended with the
        process anyway."""
        client = self.control.client("http", network_timeout_s=within_s)
        try:
            for model in client.get_model_repository_index():
                if model.get("state") == "READY":
                    client.unload_model(model["name"])
            wait_until(
                lambda: not any(m.get("state") in ("READY", "UNLOADING") for m in client.get_model_repository_index()),
                within_s,
                "the models to unload",
            )
            return True
        except (InferenceServerException, WaitTimeoutError, *CONNECTION_ERRORS):
            return False  # the process is ended next, whatever Triton says now
        finally:
            client.close()

    def unstick(self, name: str) -> str:
        """Get a stuck model serving again without restarting Triton: a Python model is reloaded from
        its model.py and the stubs that served it before are ended (failing their stuck requests);
        for a C++ backend whose thread is stuck, raises InferenceError offering ``restart()``.
        Other models are not touched. Returns what was done."""
        check_name(name)
        freed = _unstick.free(self, name)  # ends what it can; InferenceError where only a restart helps
        self.repository.mark_changed(name)
        self.load(name)
        return freed.report(self.repository.model_dir(name))

    def is_model_ready(self, name: str) -> bool:
        return bool(self._call("ask about a model", lambda c: c.is_model_ready(name)))

    def model_config(self, name: str) -> dict:
        """The config Triton is using for a loaded model (JSON form)."""
        return self._call(f"read the config of {name!r}", lambda c: c.get_model_config(name))

    def stats(self, name: str = "") -> dict:
        """Triton's statistics for one model (or all): counts, batch_stats and cumulative times in ns."""
        return self._call("read statistics", lambda c: c.get_inference_statistics(name))

    def trace_settings(self, model: str, settings: dict[str, Any] | None = None) -> dict:
        """Triton's request-trace settings for ``model``, after applying ``settings`` if given (trace_file,
        trace_level, trace_rate, log_frequency, trace_count; a value of None returns that setting to
        the server-wide one). Used by labkit.timeline."""
        if settings is None:
            return self._call("read the trace settings", lambda c: c.get_trace_settings(model_name=model))
        return self._call(
            f"change the trace settings of {model!r}",
            lambda c: c.update_trace_settings(model_name=model, settings=settings),
            refused=lambda exc: TraceError(
                model=model,
                problem=f"Triton refused the trace settings {settings}",
                detail=exc.message(),
                remedy="give settings Triton 23.12 takes (trace_level, trace_rate, log_frequency, trace_count)",
            ),
        )

    def log_settings(self, settings: dict[str, Any] | None = None) -> dict:
        """Triton's log settings (the logging extension: log_info, log_warning, log_error,
        log_verbose_level, log_format, log_file), after applying ``settings`` if given. A verbose level
        set here is what ``--log-verbose`` sets at start."""
        if settings is None:
            return self._call("read the log settings", lambda c: c.get_log_settings())
        return self._call("change the log settings", lambda c: c.update_log_settings(settings))

    def metrics_text(self, timeout_s: float = 5.0) -> str:
        """The Prometheus text from /metrics (its service starts a moment after HTTP is ready)."""
        url = self.control.endpoints.metrics_url

        def scrape() -> list[str] | None:  # a list: an empty page is an answer too
            try:
                with urllib.request.urlopen(url, timeout=10) as resp:
                    return [resp.read().decode()]
            except (urllib.error.URLError, OSError):
                if not self.alive:
                    raise ServerNotRunningError(
                        doing=f"Cannot read the metrics at {url}", reason="the server has exited", remedy="restart it"
                    ) from None
                return None

        try:
            return wait_until(scrape, timeout_s, f"the metrics endpoint {url}", interval_s=0.05)[0]
        except WaitTimeoutError:
            raise ServerNotRunningError(
                doing=f"Cannot read the metrics at {url}",
                reason="the endpoint does not answer",
                remedy="see server.logs.tail()",
            ) from None

    # -- Python backends written from a notebook ---------------------------------------------------------

    def python_model(
        self,
        name: str,
        source: str | Path | type,
        config: ModelConfig | None = None,
        *,
        load: bool = True,
        load_timeout_s: float | None = None,
    ) -> Path:
        """Write ``name/1/model.py`` (and the config, if given), then load or reload it (within
        ``load_timeout_s``, default the server's; see ``load``).

        Reloading replaces the model's Python stub, so the new code serves without restarting Triton.
        A model Triton refuses raises ModelLoadError and keeps its previous code serving; its previous
        model.py and config go back on disk, so a restart or a plain ``load`` serves that code again.
        Whether it loaded is recorded in ``attempts[name]`` (see attempts.py), also when it raised.
        """
        check_name(name)
        if config is not None and config.name != name:
            raise RepositoryError(
                subject=f"The config given for model {name!r}",
                problem=f"is for model {config.name!r}",
                refused=config.name,
                remedy=f"give a config named {name!r}, or write it under its own name",
            )
        folder = self.repository.model_dir(name)
        before = {
            relpath: (folder / relpath).read_bytes()
            for relpath in ("config.pbtxt", "1/model.py")
            if (folder / relpath).is_file()
        }
        if config is not None:
            self.repository.write_config(config)
        text = model_source(source)
        path = self.repository.write_python_model(name, text)
        with recording(self.attempts, [name], digest(text), load=load):
            if load:
                try:
                    self.load(name, timeout_s=load_timeout_s)
                except ModelLoadError:
                    for relpath, data in before.items():
                        self.repository.write_file(name, relpath, data, version=None)
                    raise
        return path

    def python_backend(self, backend: str, source: str | Path | type, *, reload: bool = True) -> list[str]:
        """Write a Python-based backend: one ``backends/<backend>/model.py`` that serves many models
        (configs saying ``backend: "<backend>"``). With ``reload``, every loaded model that uses it is
        reloaded so the new code serves; returns those models. ``attempts`` records the backend and each model."""
        check_name(backend, "backend")
        if backend == "python":
            raise InvalidNameError(
                name=backend,
                what="backend",
                problem="is the name of Triton's Python backend itself",
                remedy="give your backend another name",
            )
        text = model_source(source)
        write_atomic(self.workspace.backend_dir / backend / "model.py", text)
        with recording(self.attempts, [backend], digest(text), load=reload):
            if not reload:
                return []
            loaded = set(self.loaded_models())
            users = [m for m in self.repository.models_using(backend) if m in loaded]
            for model in users:
                self.repository.mark_changed(model)  # the model folder itself did not change
                with recording(self.attempts, [model], digest(text)):
                    self.load(model)
        return users

    # -- C++ backends compiled from a notebook --------------------------------------------------------

    def build(self, backend: str, source: str | Path | list[str | Path], **options: Any) -> Build:
        """Compile a C++ backend with this server's toolchain (see ``labkit.native.build_backend``)."""
        build = build_backend(backend, source, BuildOptions(toolchain=self.runtime.toolchain(), **options))
        self._builds[backend] = build
        return build

    def cpp_backend(
        self, backend: str, source: str | Path | list[str | Path], models: list[str] | None = None, **options: Any
    ) -> dict[str, int]:
        """Build ``libtriton_<backend>.so`` and (re)load every model that uses it (or ``models``).

        Returns the version each model now serves. A compile error raises BuildError and changes
        nothing; a model Triton refuses raises ModelLoadError and keeps its previous build serving.
        ``attempts`` records for the backend and each model whether this source built and loaded.
        """
        targets = models if models is not None else self.repository.models_using(backend)
        text = collect(source).identity()  # the cell, or every file built from
        with recording(self.attempts, [backend, *targets], digest(text)):
            build = self.build(backend, source, **options)
        served = {}
        with recording(self.attempts, [backend], digest(text)):
            for model in targets:
                with recording(self.attempts, [model], digest(text)):
                    served[model] = deploy.install(self, build, model)
        return served

    def export_backend(self, backend: str, directory: str | Path, **options: Any) -> Path:
        """A standalone CMake project for a backend built here, with this repository's models that use
        it (see ``labkit.native.export_backend``)."""
        options.setdefault("build", self._builds.get(backend))
        return export_backend(
            backend, directory, repository=self.repository, toolchain=self.runtime.toolchain(), **options
        )


def _refusal(pending: Pending) -> str:
    """Triton's reason for a load that it answered with a failure ("" if it answered otherwise)."""
    try:
        pending.result()
    except InferenceServerException as exc:
        return exc.message() or str(exc)
    except Exception:  # noqa: BLE001 - a broken connection: no reason to quote
        return ""
    return ""
