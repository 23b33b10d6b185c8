"""Triton 23.12 in a Docker container (docker-py), behind the same interface as the embedded server.

    lab = labkit.start(server="docker", image=labkit.docker.cpu_image.IMAGE)   # the offline CPU image

The container's layout (mounts at the same paths as on the host, the image's backends linked in)
is ``_container_layout``.

Ports 8000/8001/8002 are published on 127.0.0.1 only, on the host ports the config asks for
(``http_port=`` ...), else on ones Docker picks. Every container
carries labels (labkit.docker.orphans) so that leftovers of a killed kernel are removed at every launch.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any, Literal

import docker.client
import docker.errors
from docker.types import DeviceRequest, Mount, Ulimit

import docker

from ...docker import engine, images
from ...docker.compiler import ContainerToolchain
from ...docker.engine_errors import ENGINE_ERRORS, explanation_of, status_of
from ...docker.mounts import container_path
from ...docker.orphans import (
    LABEL_KIND,
    LABEL_MANAGED,
    LABEL_WORKDIR,
    cleanup,
    owner_labels,
)
from ...errors import (
    ContainerStartError,
    EngineError,
    OptionError,
    ServerNotRunningError,
    ServerStartError,
    SetupError,
    WaitTimeoutError,
)
from ...plumbing import triton_dist
from ...plumbing.endpoints import Endpoints
from ...plumbing.polling import wait_until
from ...plumbing.ports import check_free
from ...python_envs.stub_pythons import KNOWN_IMAGES
from ...stuck.debuggers import PY_SPY as PY_SPY_NAME, host_tool
from .. import user_backends
from ..base import TritonServer, compose
from ..runtime import RuntimeDefaults, Workspace
from ..server_config import ServerConfig, TritonPlace, argv
from ._container_layout import PY_SPY, ContainerLayout

CONTAINER_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}


class DockerRuntime(RuntimeDefaults):
    """Triton 23.12 in a container. Options:

    image: any Triton 23.12 image; default NGC's ``nvcr.io/nvidia/tritonserver:23.12-py3``. Offline,
        use ``labkit/tritonserver:23.12-cpu`` (``labkit image build`` builds it).
    gpus: ``"auto"`` requests all GPUs when the engine has a GPU runtime (nvidia), ``True`` requires
        them (SetupError if the engine has none), ``False`` never requests them.
    pull: pull a missing image (with a progress line); False raises SetupError instead.
    shm_size, memlock, stack: ``--shm-size`` and ``--ulimit`` values as NVIDIA recommends for Triton.
    volumes: extra bind mounts ``{host_path: container_path}`` (append ``:ro`` to the container path
        for read-only). A host path that does not exist raises SetupError; nothing is created.
    environment: extra environment variables for Triton (and the Python stubs).
    user: ``uid:gid`` to run as; default the host user when not root, so files written into the
        mounted folders stay yours.
    """

    kind = "docker"
    _toolchain: ContainerToolchain | None  # toolchain() only ever stores the container's own

    def __init__(
        self,
        workspace: Workspace,
        *,
        image: str = images.DEFAULT_IMAGE,
        gpus: bool | Literal["auto"] = "auto",
        pull: bool = True,
        shm_size: str = "1g",
        memlock: int = -1,
        stack: int = 67108864,
        volumes: dict[str | Path, str] | None = None,
        environment: dict[str, str] | None = None,
        user: str | None = None,
        progress: bool = True,
    ) -> None:
        if gpus not in ("auto", True, False):
            raise OptionError(option="gpus", value=gpus, valid="'auto', True or False")
        super().__init__(workspace)
        self.image = image
        self.gpus = gpus
        self.pull = pull
        self.shm_size = shm_size
        self.memlock = memlock
        self.stack = stack
        self.volumes = {Path(k): v for k, v in (volumes or {}).items()}
        self.environment = dict(environment or {})
        self.user = user if user is not None else (None if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}")
        self.progress = progress
        self.build_root = triton_dist.cache_dir() / "docker-builds"
        self.layout = ContainerLayout(workspace, self.build_root)
        #: True when the container got a GPU device request.
        self.uses_gpus = False
        self._client: docker.client.DockerClient | None = None
        self._container: Any = None
        self._exited = False
        self._log_thread: threading.Thread | None = None
        self._toolchain_run = ""  # the run_id the toolchain's container belongs to
        self._config = ServerConfig()

    def describe(self) -> str:
        return f"docker, {self.image}"

    # -- what the container sees ----------------------------------------------------------------------

    @property
    def container(self) -> Any:
        """The docker-py Container (None before start)."""
        return self._container

    def _argv(self) -> list[str]:
        place = TritonPlace(
            self.layout.container_repository,
            self.layout.container_backends,
            # Inside the container Triton listens on all interfaces; the host publishes on 127.0.0.1 only.
            "0.0.0.0",
            CONTAINER_PORTS["http"],
            CONTAINER_PORTS["grpc"],
            CONTAINER_PORTS["metrics"],
            gpu_metrics=self.uses_gpus,
        )
        return self.layout.command(argv(self._config, place))

    def trace_folder(self) -> tuple[Path, str]:
        return self.layout.trace_folder()

    def host_path(self, path: str) -> str:
        for host, target in self.volumes.items():  # a mount's own path first (an environment under /labkit/)
            inside = target.partition(":")[0].rstrip("/")
            if path == inside or path.startswith(inside + "/"):
                return str(host) + path[len(inside) :]
        return self.layout.host_path(path)

    def _device_requests(self, client: docker.client.DockerClient) -> list[DeviceRequest]:
        if self.gpus is False:
            return []
        if engine.gpu_runtime(client) is None:
            if self.gpus is True:
                raise SetupError(
                    needed_by="gpus=True",
                    missing="GPU runtime",
                    reason="the Docker engine lists no GPU runtime (no 'nvidia' in `docker info` Runtimes)",
                    remedy="Install the NVIDIA Container Toolkit and restart the engine, or use gpus='auto'/False for CPU only",
                )
            return []
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]

    # -- lifecycle ------------------------------------------------------------------------------------

    def launch(self, config: ServerConfig) -> Endpoints:
        self.new_run()
        self._config = config
        client = self._client = engine.connect()
        try:
            cleanup(client=client)
        except EngineError:
            pass  # a sweep that fails must not stop a launch
        images.local_image(self.image, client, pull=self.pull, progress=self.progress)
        devices = self._device_requests(client)
        self.uses_gpus = bool(devices)
        check_free(config.ports, "127.0.0.1")  # the host ports asked for, where Docker publishes them
        self.layout.prepare_backends()
        volumes = dict(self.volumes)
        if config.backend_directory is not None:  # the person's backends, read-only, linked in by name
            folder = Path(config.backend_directory).expanduser().resolve()
            inside = container_path(folder, "/labkit/user-backends")
            user_backends.link(self.workspace.backend_dir, folder, seen_as=inside)
            volumes[folder] = f"{inside}:ro"
        else:
            user_backends.unlink_all(self.workspace.backend_dir)
        mounts = self.layout.mounts(volumes)
        labels = {LABEL_MANAGED: "1", LABEL_KIND: "tritonserver", **owner_labels()}
        if self.workspace.owned:
            labels[LABEL_WORKDIR] = str(self.workspace.workdir)
        self._exited = False
        ulimits = {"memlock": self.memlock, "stack": self.stack}
        engine_id = client.info().get("ID", "")
        if self.memlock == -1 and engine.engine_note(engine_id, "memlock_refused"):
            del ulimits["memlock"]
            self._note("this engine refused --ulimit memlock=-1 before; using its default memlock limit")
        try:
            self._create_and_start(client, mounts, devices, labels, ulimits)
        except docker.errors.APIError as exc:
            if "memlock" not in ulimits:
                raise self._start_error(exc) from None
            # Raising the memlock hard limit needs CAP_SYS_RESOURCE, which a nested or rootless engine may
            # lack. Unlimited memlock matters for GPU pinned memory only: try once more with the engine's
            # limit; if that starts, the limit was what the engine refused.
            self._remove_container()
            del ulimits["memlock"]
            try:
                self._create_and_start(client, mounts, devices, labels, ulimits)
            except docker.errors.APIError as exc2:
                raise self._start_error(exc2) from None
            engine.engine_note(engine_id, "memlock_refused", True)
            self._note(
                "the engine may not raise the memlock limit (no CAP_SYS_RESOURCE); "
                "started with its default memlock limit instead of unlimited"
            )
        endpoints = self._read_ports(config.host)
        self._log_thread = threading.Thread(target=self._pump_logs, name=f"{self._container.name}-logs", daemon=True)
        self._log_thread.start()
        return endpoints

    def _note(self, text: str) -> None:
        with open(self.workspace.logs.path, "ab") as log:
            log.write(f"labkit: {text}\n".encode())

    def _create_and_start(
        self,
        client: docker.client.DockerClient,
        mounts: list[Mount],
        devices: list[DeviceRequest],
        labels: dict[str, str],
        ulimits: dict[str, int],
    ) -> None:
        """Create and start the container; APIError from ``start`` propagates (the container stays for its logs)."""
        name = f"labkit-triton-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            self._container = client.containers.create(
                self.image,
                command=self._argv(),
                name=name,
                labels=labels,
                ports={
                    f"{port}/tcp": ("127.0.0.1", self._config.ports[key]) if self._config.ports[key] else ("127.0.0.1",)
                    for key, port in CONTAINER_PORTS.items()
                },
                mounts=mounts,
                shm_size=self.shm_size,
                ulimits=[Ulimit(name=key, soft=value, hard=value) for key, value in ulimits.items()],
                device_requests=devices or None,
                environment={"PYTHONUNBUFFERED": "1", **self.environment},
                user=self.user or "",
                detach=True,
                auto_remove=False,  # a container that fails keeps its logs until labkit has read them
            )
        except docker.errors.APIError as exc:
            raise ContainerStartError(
                doing="create the Triton container",
                image=self.image,
                detail=explanation_of(exc),
                status_code=status_of(exc),
                remedy="check the image and the options given to labkit.start()",
            ) from None
        self._note(f"container {name} from {self.image}")
        self._container.start()

    def _start_error(self, exc: docker.errors.APIError) -> ContainerStartError:
        tail = self._container_logs()
        self._remove_container()
        hint = "the engine may have no GPU runtime for the device request; try gpus=False" if self.uses_gpus else ""
        return ContainerStartError(
            doing="start the Triton container",
            detail=explanation_of(exc),
            log_tail=tail,
            status_code=status_of(exc),
            remedy=hint or "read the container's last log lines below",
        )

    def _read_ports(self, host: str) -> Endpoints:
        def published() -> dict[str, dict] | None:
            self._container.reload()
            ports = self._container.attrs["NetworkSettings"].get("Ports") or {}
            try:
                return {key: ports[f"{port}/tcp"][0] for key, port in CONTAINER_PORTS.items()}
            except (KeyError, IndexError, TypeError):
                if self._container.status != "running":
                    raise self._unpublished() from None
                return None

        try:
            ports = wait_until(published, 10, "the container's ports", interval_s=0.05)
        except WaitTimeoutError:
            raise self._unpublished() from None
        for binding in ports.values():
            if binding["HostIp"] not in ("127.0.0.1", ""):
                raise ServerStartError(
                    doing="The Triton container cannot serve here",
                    reason=f"Docker published a port on {binding['HostIp']}, not 127.0.0.1",
                    remedy="publish Triton's ports on 127.0.0.1 (check the engine's default address)",
                )
        return Endpoints(host, *(int(ports[key]["HostPort"]) for key in CONTAINER_PORTS))

    def _unpublished(self) -> ServerStartError:
        return ServerStartError(
            doing=f"The Triton container {self._container.name} did not start",
            reason="it exited before its ports were published",
            exit_summary=f"status {self._container.status}",
            log_tail=self._container_logs(),
            remedy="read its last log lines below",
        )

    def _pump_logs(self) -> None:
        """Copy the container's output into the log file as it comes (ends when the container does)."""
        container_id = self._container.id
        try:
            client = docker.client.from_env(timeout=None)  # no read timeout: Triton may be quiet for hours
            try:
                stream = client.api.logs(container_id, stdout=True, stderr=True, stream=True, follow=True)
                with open(self.workspace.logs.path, "ab") as log:
                    for chunk in stream:
                        log.write(chunk)
                        log.flush()
            finally:
                client.close()
        except (*ENGINE_ERRORS, OSError):
            pass  # the engine went away or the container was removed: nothing more to copy

    def _drain_logs(self, timeout_s: float = 3.0) -> None:
        if self._log_thread is not None:
            self._log_thread.join(timeout_s)

    def _container_logs(self, lines: int = 25) -> str:
        try:
            return self._container.logs(tail=lines).decode(errors="replace").rstrip()
        except (*ENGINE_ERRORS, AttributeError):
            return ""

    def failure_tail(self) -> str:
        self._drain_logs()
        return self.workspace.logs.tail(25) or self._container_logs()

    def exit_summary(self) -> str:
        if self._client is None:  # never launched
            return "the container is gone"
        try:
            state = self._client.api.inspect_container(self._container.id)["State"]
        except (*ENGINE_ERRORS, AttributeError):
            return "the container is gone"
        if state.get("Running"):
            return ""
        text = f"exit code {state.get('ExitCode')}"
        if state.get("OOMKilled"):
            text += ", killed for lack of memory"
        if state.get("Error"):
            text += f", {state['Error']}"
        return text

    def _remove_container(self) -> None:
        if self._container is None:
            return
        try:
            self._container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except ENGINE_ERRORS:
            pass  # cleanup() at the next launch removes it (it carries our labels)

    def end(self, grace_s: float = 0.0) -> None:
        if self._container is not None:
            try:
                # No grace, whatever grace_s: stop() has unloaded the models already, and what Triton's own
                # exit would clean up (python_backend's /tmp/python_env_*) goes with the container.
                self._container.stop(timeout=0)
            except ENGINE_ERRORS:
                pass
            self._drain_logs()
            self._remove_container()
        if self._client is not None:
            self._client.close()

    def running(self) -> bool:
        if self._container is None or self._client is None or self._exited:  # the client comes first
            return False
        try:
            state = self._client.api.inspect_container(self._container.id)["State"]
        except docker.errors.NotFound:
            self._exited = True
            return False
        except ENGINE_ERRORS:
            return False
        if not state.get("Running") or state.get("Restarting"):
            self._exited = True
            return False
        return True

    # -- tools beside Triton (Beside): inside the container ---------------------------------------------

    @property
    def triton_pid(self) -> int | None:
        return 1 if self._container is not None else None  # tritonserver is the container's PID 1 (exec)

    def run_beside(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str, str]:
        argv = ["python3" if argv[0] == "python" else argv[0], *argv[1:]]
        # docker exec has no time limit; coreutils' timeout (in every Triton image) exits 124 like ours.
        return self._exec(["timeout", f"{timeout_s:g}", *argv], None, {})

    def debug_tool(self, name: str) -> str | None:
        if name == PY_SPY_NAME:
            return PY_SPY if host_tool(PY_SPY_NAME) is not None else None
        code, out, _ = self._exec(["sh", "-c", f"command -v {name}"], None, {})
        return (out.strip() or None) if code == 0 else None

    def stub_python(self) -> tuple[int, int] | None:
        known = KNOWN_IMAGES.get(self.image)
        if known is not None:
            return known[0]
        code, out, _ = self.run_beside(["python", "-c", "import sys; print(*sys.version_info[:2])"])
        words = out.split()
        return (int(words[0]), int(words[1])) if code == 0 and len(words) == 2 else None

    def signal_beside(self, pid: int, sig: int) -> None:
        self._exec(["sh", "-c", f"kill -{int(sig)} {int(pid)} 2>/dev/null || true"], None, {})

    # -- C++ builds inside the container -------------------------------------------------------------

    def _exec(self, argv: list[str], workdir: str | None, environment: dict[str, str]) -> tuple[int, str, str]:
        if not self.running():
            raise ServerNotRunningError(
                reason="the Triton container is not running",
                log_tail=self.workspace.logs.tail(25),
                remedy="start a server first",
            )
        try:
            code, (out, err) = self._container.exec_run(
                argv, workdir=workdir, demux=True, user=self.user or "", environment=environment
            )
        except ENGINE_ERRORS as exc:
            raise EngineError(
                doing=f"run {argv[0]} in the Triton container",
                detail=str(exc),
                status_code=getattr(exc, "status_code", 0) or 0,
                remedy="check that the container still runs (`docker ps`)",
            ) from None
        return code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")

    def toolchain(self) -> ContainerToolchain:
        """The container's own g++ (so the C++ runtime matches the one the backend runs with).
        ``headers="image"`` in a build takes Triton's headers from the image (NGC's /opt/tritonserver/include)."""
        if self._toolchain is None or self._toolchain_run != self.run_id:
            self._toolchain = ContainerToolchain(
                self._exec,
                self.build_root,
                self._container.image.id,
                self.image,
                self.environment.get("CXX", "g++"),
            )
            self._toolchain_run = self.run_id
        return self._toolchain


class DockerServer(TritonServer):
    """A TritonServer whose Triton runs in a container (DockerRuntime). Takes the repository and work
    folders, ServerConfig's options and DockerRuntime's (``image=``, ``gpus=``, ...) as keywords."""

    __slots__ = ()

    def __init__(self, repository: str | Path | None = None, workdir: str | Path | None = None, **options: Any) -> None:
        super().__init__(*compose(DockerRuntime, repository, workdir, options))
