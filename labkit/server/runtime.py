"""Where and how Triton runs: the Runtime protocol that the embedded process and the Docker container
both implement, and the Workspace (work folder, repository, log, backend folder) they share with the
rest of a server.

A runtime starts and ends Triton, says whether it runs and how it ended, maps paths between this
machine and Triton's, and runs tools beside Triton (``Beside``: stacks of stuck models, signals to
stubs). It knows nothing of models or clients: those are ``Models`` and the control plane.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..native.toolchain import LocalToolchain, Toolchain
from ..plumbing.endpoints import Endpoints
from ..plumbing.owner import Owner
from ..repository import ModelRepository
from ..stuck.debuggers import Beside
from .logs import LogView
from .server_config import ServerConfig

WORKDIR_PREFIX = "labkit-"
OWNER_FILE = "owner.pid"
OWNER_START_FILE = "owner.start"
SERVER_FILE = "server.pid"


@dataclass(frozen=True)
class Workspace:
    """The folders of one server: ``workdir`` (logs, traces, backends), the model repository and the
    log. ``owned``: labkit made the work folder, and removes it when the server stops."""

    workdir: Path
    repository: ModelRepository
    logs: LogView
    owned: bool

    @classmethod
    def create(cls, kind: str, repository: str | Path | None, workdir: str | Path | None) -> Workspace:
        owned = workdir is None
        folder = Path(workdir or tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{kind}-")).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        if owned:  # so that the next launch can clean up if this process is killed
            owner = Owner.me()
            (folder / OWNER_START_FILE).write_text(owner.start)
            (folder / OWNER_FILE).write_text(str(owner.pid))
        (folder / "logs").mkdir(exist_ok=True)
        (folder / "traces").mkdir(exist_ok=True)
        repo = ModelRepository(repository if repository is not None else folder / "repository")
        return cls(folder, repo, LogView(folder / "logs" / "tritonserver.log"), owned)

    @property
    def backend_dir(self) -> Path:
        """Triton's ``--backend-directory``: the Python backend, and backends written from a notebook."""
        return self.workdir / "backends"

    @property
    def traces(self) -> Path:
        return self.workdir / "traces"

    def remove(self, keep_log: bool = False) -> None:
        """Remove the work folder labkit made; with ``keep_log``, all of it but the log (at the same
        path), which the sweep of leftovers then leaves alone too."""
        if not self.owned:
            return
        if not keep_log:
            shutil.rmtree(self.workdir, ignore_errors=True)
            return
        for entry in self.workdir.iterdir():  # the owner files go too: no sweep takes the folder then
            if entry != self.logs.path.parent:
                shutil.rmtree(
                    entry, ignore_errors=True
                ) if entry.is_dir() and not entry.is_symlink() else entry.unlink()


class Runtime(Beside, Protocol):
    """One way of running Triton 23.12 (``labkit/server/launchers/<kind>.py`` has one each)."""

    kind: str
    workspace: Workspace
    #: Changes at every launch: Triton state that lives as long as one process (e.g. the backend
    #: libraries it has opened) is keyed by it.
    run_id: str
    #: How many launches a start tries when ``retry_launch()`` says a failure was a passing one.
    launch_attempts: int

    def launch(self, config: ServerConfig) -> Endpoints:
        """Start Triton (it need not be ready yet); return where it answers."""
        ...

    def running(self) -> bool:
        """Whether Triton's process (or container) still runs."""
        ...

    def end(self, grace_s: float = 0.0) -> None:
        """End Triton (its process or container) and what it holds; keep the files. ``grace_s``: how
        long it may take to exit on its own (its backends' finalize runs) before it is killed."""
        ...

    def exit_summary(self) -> str:
        """How Triton ended, e.g. "exit code 137"; "" while it runs or when unknown."""
        ...

    def failure_tail(self) -> str:
        """The log lines that explain a failure."""
        ...

    def after_death(self) -> None:
        """Called once when Triton died on its own: end what it left running."""
        ...

    def retry_launch(self) -> bool:
        """After a failed launch (already ended): was it a passing failure worth another try?"""
        ...

    def triton_threads(self) -> Path | None:
        """``/proc/<pid>/task`` of the Triton process, where this machine sees it; None elsewhere."""
        ...

    def host_path(self, path: str) -> str:
        """A path as Triton sees it, on this machine."""
        ...

    def trace_folder(self) -> tuple[Path, str]:
        """Where Triton writes request traces: the folder here, and its path as Triton sees it."""
        ...

    def toolchain(self) -> Toolchain:
        """Where C++ backends for this Triton are compiled."""
        ...

    def stub_python(self) -> tuple[int, int] | None:
        """The Python (major, minor) that the stub of Triton's python backend embeds here (None: unknown)."""
        ...

    def signal_beside(self, pid: int, sig: int) -> None:
        """Send a signal to a process beside Triton (a stub); one that already ended is fine."""
        ...


class RuntimeDefaults:
    """What most runtimes answer alike; a runtime overrides what differs for it."""

    kind = "abstract"
    launch_attempts = 1
    workspace: Workspace

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.run_id = ""
        self._toolchain: Toolchain | None = None

    def new_run(self) -> None:
        self.run_id = uuid.uuid4().hex

    def describe(self) -> str:
        return self.kind

    def failure_tail(self) -> str:
        return self.workspace.logs.tail(25)

    def after_death(self) -> None:
        pass

    def retry_launch(self) -> bool:
        return False

    def triton_threads(self) -> Path | None:
        return None

    def host_path(self, path: str) -> str:
        return path

    def trace_folder(self) -> tuple[Path, str]:
        return self.workspace.traces, str(self.workspace.traces)

    def stub_python(self) -> tuple[int, int] | None:
        return (sys.version_info[0], sys.version_info[1])  # labkit installs the wheel's stub for its own Python

    def toolchain(self) -> Toolchain:
        if self._toolchain is None:
            self._toolchain = LocalToolchain()
        return self._toolchain
