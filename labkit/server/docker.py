"""Triton 23.12 in a Docker container (docker-py), behind the same interface as the embedded server.

    from labkit.server.docker import DockerServer
    with DockerServer(image="labkit/tritonserver:23.12-cpu") as lab:   # the offline CPU image
        lab.start()
        ...

Layout inside the container (chosen so that paths in Triton's log agree with the host):

* the model repository is bind-mounted at the **same path** as on the host;
* the server's backend folder (``<workdir>/backends``, where ``python_backend()`` writes) is
  bind-mounted at the same path and is Triton's ``--backend-directory``. Each of the image's own
  backends (``/opt/tritonserver/backends/*``: ``python``, and in NGC's image ``onnxruntime``, ...) is
  symbolically linked into it (unless the folder has one of that name), so the Python backend and its
  stub are the image's (they match the image's Python) while user backends come from the host;
* C++ builds happen inside the container (``build()``), in a cache folder mounted at the same path.

A host path under a system folder of the image (``/usr``, ``/opt/tritonserver``, ...) is mounted
under ``/labkit/`` instead. The engine must see the host's file system (a local engine, or labkit
running in a container whose work folders are mounted at the same paths on the engine's host).

Ports 8000/8001/8002 are published on 127.0.0.1 only, on host ports Docker picks. Every container
carries labels (``labkit.managed=1``, ``labkit.owner=<host>:<pid>``) so that ``cleanup()`` can find
leftovers of a killed kernel; it runs at every launch.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest, Mount, Ulimit

from .. import _triton_dist
from ..errors import BuildError, ServerNotRunningError, ServerStartError, SetupError
from ..image import IMAGE as OFFLINE_IMAGE
from ..repository import ModelRepository
from .base import TritonServer

DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:23.12-py3"
CONTAINER_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
IMAGE_BACKENDS = "/opt/tritonserver/backends"  # where NGC's image (and labkit's) keep the Python backend

LABEL_MANAGED = "labkit.managed"
LABEL_OWNER = "labkit.owner"  # <hostname>:<pid> of the Python process that started the container
LABEL_OWNER_START = "labkit.owner_start"  # that process's start time, so a reused pid is not mistaken for it
LABEL_WORKDIR = "labkit.workdir"  # a temporary folder the owner would have removed on stop
LABEL_KIND = "labkit.kind"

# Host paths that would hide the image's own files if mounted at the same path in the container.
_RESERVED = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt/tritonserver",
             "/opt/nvidia", "/proc", "/run", "/sbin", "/sys", "/usr", "/var/lib", "/labkit")

_LINK_IMAGE_BACKENDS = """
src="$1"; dst="$2"; shift 2
for b in "$src"/*; do
  n="${b##*/}"
  [ -d "$b" ] && [ ! -e "$dst/$n" ] && [ ! -L "$dst/$n" ] && ln -s "$b" "$dst/$n"
done
exec "$@"
"""

_HOW_TO_START = (
    "Start one: `sudo dockerd` (on this project's CI machines `sudo .ci/docker-engine.sh` installs docker.io "
    "and starts `dockerd --storage-driver=vfs`), or start Docker Desktop; set DOCKER_HOST if it listens "
    "elsewhere. Without Docker, use the embedded server (labkit.start())."
)


# -- the engine -------------------------------------------------------------------------------------


def connect(timeout: int | None = 60) -> docker.DockerClient:
    """A docker-py client for the engine in the environment (DOCKER_HOST or the default socket).

    Raises SetupError, saying how to start an engine, when none answers.
    """
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        reason = str(exc)
        if "FileNotFoundError" in reason or "No such file" in reason:
            reason = "no socket there"
        elif "Connection refused" in reason or "ConnectionRefusedError" in reason:
            reason = "connection refused"
        if "Permission denied" in reason or "PermissionError" in reason:
            raise SetupError(
                f"The Docker engine refused this user ({reason}). Add yourself to the `docker` group "
                f"(`sudo usermod -aG docker $USER`, then log in again) or run as root."
            ) from None
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        raise SetupError(f"No Docker engine is reachable at {where} ({reason}). {_HOW_TO_START}") from None
    except requests.exceptions.RequestException as exc:
        raise SetupError(f"The Docker engine does not answer ({exc}). {_HOW_TO_START}") from None


def engine_status() -> tuple[bool, str]:
    """(True, engine version) when an engine answers, else (False, why not and how to start one)."""
    try:
        client = connect(timeout=10)
    except SetupError as exc:
        return False, str(exc)
    try:
        return True, client.version().get("Version", "?")
    finally:
        client.close()


def _engine_note(engine_id: str, key: str, value: bool | None = None) -> bool:
    """Remember (per engine, across processes) what an engine refused, so a launch need not try twice."""
    path = _triton_dist.cache_dir() / "docker-engines.json"
    try:
        notes = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        notes = {}
    if value is None:
        return bool(engine_id and notes.get(engine_id, {}).get(key))
    if engine_id:
        notes.setdefault(engine_id, {})[key] = value
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(notes, indent=1))
    return value


def gpu_runtime(client: docker.DockerClient) -> str | None:
    """The engine's GPU-capable runtime (e.g. ``nvidia``), or None when it lists none."""
    runtimes = client.info().get("Runtimes") or {}
    return next((name for name in runtimes if "nvidia" in name.lower()), None)


# -- leftovers --------------------------------------------------------------------------------------


def _process_start(pid: int) -> str | None:
    """A token for when process ``pid`` started ("?" where /proc is missing), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return "?"


def _owner_labels() -> dict[str, str]:
    pid = os.getpid()
    return {LABEL_OWNER: f"{socket.gethostname()}:{pid}", LABEL_OWNER_START: _process_start(pid) or "?"}


def owner_dead(labels: dict[str, str]) -> bool:
    """True when the process that started a labkit container is gone (on this host; other hosts are not judged)."""
    host, _, pid_text = (labels.get(LABEL_OWNER) or "").rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    started = _process_start(int(pid_text))
    if started is None:
        return True
    recorded = labels.get(LABEL_OWNER_START, "?")
    return "?" not in (started, recorded) and started != recorded  # the pid now belongs to another process


def leftovers(all: bool = False, client: docker.DockerClient | None = None) -> list[Any]:
    """labkit's containers whose owner process is dead (with ``all``: every labkit container)."""
    client = client or connect()
    found = client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
    return [c for c in found if all or owner_dead(c.labels)]


def cleanup(all: bool = False, *, client: docker.DockerClient | None = None) -> list[str]:
    """Remove labkit's leftover containers; returns their names.

    By default only containers whose owner process (a kernel, a script) is dead on this host; with
    ``all=True`` every container labkit started, including those of running servers. The temporary
    work folder of a dead owner is removed too. Runs automatically at every DockerServer launch.
    """
    own_client = client is None
    client = client or connect()
    try:
        return _remove_leftovers(leftovers(all, client))
    finally:
        if own_client:
            client.close()


def _remove_leftovers(containers: list[Any]) -> list[str]:
    removed = []
    for container in containers:
        dead = owner_dead(container.labels)
        try:
            container.remove(force=True, v=True)
            removed.append(container.name)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise
        workdir = container.labels.get(LABEL_WORKDIR)
        if dead and workdir and Path(workdir).name.startswith("labkit-docker-"):
            shutil.rmtree(workdir, ignore_errors=True)
    return removed


# -- images -----------------------------------------------------------------------------------------


def _image_missing_hint(image: str) -> str:
    if image == OFFLINE_IMAGE:
        return "Build it here, no registry needed (about 80 s, as root): `labkit image build` or labkit.image.build_image()."
    return (
        f"For a CPU-only image built here without any registry, run `labkit image build` "
        f"(labkit.image.build_image()) and use DockerServer(image={OFFLINE_IMAGE!r})."
    )


class _PullProgress:
    """One self-rewriting line on stderr: layers done and megabytes downloaded."""

    def __init__(self, image: str, enabled: bool) -> None:
        self.image, self.enabled = image, enabled
        self.layers: dict[str, tuple[int, int]] = {}
        self.done: set[str] = set()
        self.last = 0.0

    def update(self, event: dict) -> None:
        layer, status = event.get("id"), event.get("status", "")
        detail = event.get("progressDetail") or {}
        if layer and detail.get("total"):
            self.layers[layer] = (detail.get("current", 0), detail["total"])
        if layer and status in ("Pull complete", "Already exists"):
            self.done.add(layer)
        now = time.monotonic()
        if self.enabled and now - self.last > 0.5:
            self.last = now
            current = sum(c for c, _ in self.layers.values()) / 1e6
            total = sum(t for _, t in self.layers.values()) / 1e6
            print(f"\rpulling {self.image}: {len(self.done)} layers done, {current:.0f}/{total:.0f} MB   ",
                  end="", file=sys.stderr, flush=True)

    def finish(self, ok: bool) -> None:
        if self.enabled:
            print(f"\rpulling {self.image}: {'done' if ok else 'failed'}{' ' * 40}", file=sys.stderr, flush=True)


def pull_image(image: str, client: docker.DockerClient | None = None, progress: bool = True) -> None:
    """Pull ``image`` with a progress line; a failure raises SetupError saying why and what else to do."""
    client = client or connect()
    repository, tag = docker.utils.parse_repository_tag(image)
    bar = _PullProgress(image, progress)
    try:
        for event in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                raise docker.errors.APIError(event["error"])
            bar.update(event)
    except docker.errors.APIError as exc:
        bar.finish(False)
        reason = getattr(exc, "explanation", None) or str(exc)
        login = " If the registry needs a login, run `docker login nvcr.io` (user $oauthtoken, an NGC API key)." \
            if image.startswith("nvcr.io/") else ""
        raise SetupError(
            f"Docker image {image!r} is not on this engine and could not be pulled: {reason}.{login} "
            f"{_image_missing_hint(image)}"
        ) from None
    bar.finish(True)


def ensure_image(image: str, client: docker.DockerClient, *, pull: bool = True, progress: bool = True) -> Any:
    """The local image ``image``; pulled first if missing (when ``pull``)."""
    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:
        if "invalid reference format" in str(exc) or exc.status_code == 400:
            raise SetupError(f"{image!r} is not a valid Docker image name ({exc.explanation}); "
                             f"write it as [registry/]name[:tag], e.g. {OFFLINE_IMAGE!r}.") from None
        raise
    if image == OFFLINE_IMAGE:  # built locally, published nowhere: pulling would only fail
        raise SetupError(f"Docker image {image!r} is not on this engine yet. {_image_missing_hint(image)}")
    if not pull:
        raise SetupError(f"Docker image {image!r} is not on this engine (and pull=False). {_image_missing_hint(image)}")
    pull_image(image, client, progress)
    return client.images.get(image)


# -- the launcher -----------------------------------------------------------------------------------


def _container_path(host: Path, fallback: str) -> str:
    """Where a host folder appears in the container: the same path, unless that would hide image files."""
    text = host.as_posix()
    if text == "/" or any(text == r or text.startswith(r + "/") for r in _RESERVED):
        return fallback
    return text


class DockerServer(TritonServer):
    """Triton 23.12 in a container: same interface as EmbeddedServer, plus container details.

    Options:
        repository: the model repository folder (default ``<workdir>/repository``).
        workdir: logs and the backend folder (default: a new temporary folder ``stop()`` removes).
        image: any Triton 23.12 image; default NGC's ``nvcr.io/nvidia/tritonserver:23.12-py3``. Offline,
            use ``labkit/tritonserver:23.12-cpu`` (``labkit.image.build_image()`` builds it).
        gpus: ``"auto"`` requests all GPUs when the engine has a GPU runtime (nvidia), ``True`` requires
            them (SetupError if the engine has none), ``False`` never requests them.
        pull: pull a missing image (with a progress line); False raises SetupError instead.
        shm_size, memlock, stack: ``--shm-size`` and ``--ulimit`` values as NVIDIA recommends for Triton.
        volumes: extra bind mounts ``{host_path: container_path}`` (append ``:ro`` to the container path
            for read-only). A host path that does not exist raises SetupError; nothing is created.
        environment: extra environment variables for Triton (and the Python stubs).
        user: ``uid:gid`` to run as; default the host user when not root, so files written into the
            mounted folders stay yours.
        log_verbose, extra_args: as for EmbeddedServer.
    """

    kind = "docker"

    def __init__(
        self,
        repository: str | Path | None = None,
        workdir: str | Path | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        gpus: bool | Literal["auto"] = "auto",
        pull: bool = True,
        shm_size: str = "1g",
        memlock: int = -1,
        stack: int = 67108864,
        volumes: dict[str | Path, str] | None = None,
        environment: dict[str, str] | None = None,
        user: str | None = None,
        log_verbose: int = 0,
        extra_args: list[str] | None = None,
        progress: bool = True,
    ) -> None:
        if gpus not in ("auto", True, False):
            raise ValueError(f"gpus must be 'auto', True or False, not {gpus!r}")
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="labkit-docker-")).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        repo = ModelRepository(repository if repository is not None else self.workdir / "repository")
        super().__init__(repo, self.workdir / "logs" / "tritonserver.log", self.workdir / "backends")
        self.image = image
        self.gpus = gpus
        self.pull = pull
        self.shm_size = shm_size
        self.memlock = memlock
        self.stack = stack
        self.volumes = {Path(k): v for k, v in (volumes or {}).items()}
        self.environment = dict(environment or {})
        self.user = user if user is not None else (None if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}")
        self.log_verbose = log_verbose
        self.extra_args = list(extra_args or [])
        self.progress = progress
        self.build_root = _triton_dist.cache_dir() / "docker-builds"
        #: True when the container got a GPU device request.
        self.uses_gpus = False
        self._client: docker.DockerClient | None = None
        self._container: Any = None
        self._exited = False
        self._ran = False  # a container of ours got as far as running
        self._log_thread: threading.Thread | None = None
        self._compiler: tuple[str, str] | None = None

    # -- what the container sees ----------------------------------------------------------------------

    @property
    def container(self) -> Any:
        """The docker-py Container (None before start)."""
        return self._container

    @property
    def container_repository(self) -> str:
        return _container_path(self.repository.root, "/labkit/models")

    @property
    def container_backends(self) -> str:
        return _container_path(self.backend_dir, "/labkit/backends")

    def _mounts(self) -> list[Mount]:
        wanted: list[tuple[Path, str, bool]] = [
            (self.repository.root, self.container_repository, False),
            (self.backend_dir, self.container_backends, False),
            (self.build_root, _container_path(self.build_root, "/labkit/builds"), False),
        ]
        for host, target in self.volumes.items():
            target, _, mode = target.partition(":")
            if not target.startswith("/"):
                raise SetupError(f"Mount target {target!r} (for {host}) must be an absolute path in the container.")
            wanted.append((host.expanduser().resolve(), target, mode == "ro"))
        mounts = []
        for host, target, read_only in wanted:
            if not host.exists():
                raise SetupError(
                    f"Cannot mount {host} into the container: it does not exist. Create it (or fix the path) "
                    f"first; labkit does not let Docker create it as an empty folder."
                )
            mounts.append(Mount(target=target, source=str(host), type="bind", read_only=read_only))
        return mounts

    def _prepare_backends(self) -> None:
        """backends/python -> the image's Python backend; user backends sit beside it."""
        self.backend_dir.mkdir(parents=True, exist_ok=True)
        self.build_root.mkdir(parents=True, exist_ok=True)
        link = self.backend_dir / "python"
        target = f"{IMAGE_BACKENDS}/python"
        if link.is_symlink():
            if os.readlink(link) == target:
                return
            link.unlink()
        elif link.is_dir():
            known = {"libtriton_python.so", "triton_python_backend_utils.py", "triton_python_backend_stub", "__pycache__"}
            if {p.name for p in link.iterdir()} - known:
                raise SetupError(f"{link} holds files other than Triton's Python backend; move them, the container "
                                 f"uses the image's Python backend there.")
            shutil.rmtree(link)  # the embedded server's copy, from an earlier run in this workdir
        link.symlink_to(target)

    def _argv(self) -> list[str]:
        # A tiny shell step first links each of the image's own backends (python, and in NGC's image
        # onnxruntime, pytorch, tensorrt, ...) into the mounted backend folder, unless the user has one
        # of that name; then it becomes tritonserver (exec), which stays PID 1.
        return ["sh", "-c", _LINK_IMAGE_BACKENDS, "labkit", IMAGE_BACKENDS, self.container_backends, *self._triton_argv()]

    def _triton_argv(self) -> list[str]:
        return [
            "tritonserver",
            f"--model-repository={self.container_repository}",
            f"--backend-directory={self.container_backends}",
            "--model-control-mode=explicit",
            # Auto-complete on lets a broken model.py hang loads for minutes in 23.12.
            "--disable-auto-complete-config",
            "--strict-readiness=true",
            # Inside the container Triton listens on all interfaces; the host publishes on 127.0.0.1 only.
            "--http-address=0.0.0.0",
            "--grpc-address=0.0.0.0",
            "--metrics-address=0.0.0.0",
            f"--http-port={CONTAINER_PORTS['http']}",
            f"--grpc-port={CONTAINER_PORTS['grpc']}",
            f"--metrics-port={CONTAINER_PORTS['metrics']}",
            f"--allow-gpu-metrics={'true' if self.uses_gpus else 'false'}",
            f"--log-verbose={self.log_verbose}",
            "--exit-timeout-secs=5",
            *self.extra_args,
        ]

    def _device_requests(self, client: docker.DockerClient) -> list[DeviceRequest]:
        if self.gpus is False:
            return []
        runtime = gpu_runtime(client)
        if runtime is None:
            if self.gpus is True:
                raise SetupError(
                    "gpus=True, but the Docker engine lists no GPU runtime (no 'nvidia' in `docker info` Runtimes). "
                    "Install the NVIDIA Container Toolkit and restart the engine, or use gpus='auto'/False for CPU only."
                )
            return []
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]

    # -- lifecycle ------------------------------------------------------------------------------------

    def _launch(self) -> None:
        client = self._client = connect()
        try:
            cleanup(client=client)
        except docker.errors.APIError:
            pass  # a sweep that fails must not stop a launch
        ensure_image(self.image, client, pull=self.pull, progress=self.progress)
        devices = self._device_requests(client)
        self.uses_gpus = bool(devices)
        self._prepare_backends()
        mounts = self._mounts()
        labels = {LABEL_MANAGED: "1", LABEL_KIND: "tritonserver", **_owner_labels()}
        if self._own_workdir:
            labels[LABEL_WORKDIR] = str(self.workdir)
        self._exited = False
        ulimits = {"memlock": self.memlock, "stack": self.stack}
        engine_id = client.info().get("ID", "")
        if self.memlock == -1 and _engine_note(engine_id, "memlock_refused"):
            del ulimits["memlock"]
            self._note("this engine refused --ulimit memlock=-1 before; using its default memlock limit")
        try:
            self._create_and_start(client, mounts, devices, labels, ulimits)
        except docker.errors.APIError as exc:
            if "error setting rlimit" not in str(exc) or "memlock" not in ulimits:
                raise self._start_error(exc) from None
            # Raising the memlock hard limit needs CAP_SYS_RESOURCE, which a nested or rootless engine may
            # lack. Unlimited memlock matters for GPU pinned memory only: carry on with the engine's limit.
            self._note("the engine may not raise the memlock limit (no CAP_SYS_RESOURCE); "
                       "started with its default memlock limit instead of unlimited")
            self._remove_container()
            del ulimits["memlock"]
            _engine_note(engine_id, "memlock_refused", True)
            try:
                self._create_and_start(client, mounts, devices, labels, ulimits)
            except docker.errors.APIError as exc2:
                raise self._start_error(exc2) from None
        self._read_ports()
        self._log_thread = threading.Thread(target=self._pump_logs, name=f"{self._container.name}-logs", daemon=True)
        self._log_thread.start()

    def _note(self, text: str) -> None:
        with open(self.logs.path, "ab") as log:
            log.write(f"labkit: {text}\n".encode())

    def _create_and_start(self, client: docker.DockerClient, mounts: list[Mount], devices: list[DeviceRequest],
                          labels: dict[str, str], ulimits: dict[str, int]) -> None:
        """Create and start the container; APIError from ``start`` propagates (the container stays for its logs)."""
        name = f"labkit-triton-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            self._container = client.containers.create(
                self.image,
                command=self._argv(),
                name=name,
                labels=labels,
                ports={f"{port}/tcp": ("127.0.0.1",) for port in CONTAINER_PORTS.values()},
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
            raise ServerStartError(f"Docker could not create the Triton container from {self.image}: "
                                   f"{exc.explanation or exc}") from None
        self._note(f"container {name} from {self.image}")
        self._container.start()
        self._ran = True

    def _start_error(self, exc: docker.errors.APIError) -> ServerStartError:
        tail = self._container_logs()
        self._remove_container()
        hint = " (the engine has no GPU runtime for the device request; try gpus=False)" \
            if "device driver" in str(exc) else ""
        return ServerStartError(f"Docker could not start the Triton container: {exc.explanation or exc}{hint}", tail)

    def _read_ports(self) -> None:
        deadline = time.monotonic() + 10
        while True:
            self._container.reload()
            published = self._container.attrs["NetworkSettings"].get("Ports") or {}
            try:
                ports = {key: published[f"{port}/tcp"][0] for key, port in CONTAINER_PORTS.items()}
            except (KeyError, IndexError, TypeError):
                ports = None
            if ports:
                break
            if self._container.status != "running" or time.monotonic() > deadline:
                tail = self._container_logs()
                raise ServerStartError(f"The Triton container {self._container.name} exited before its ports were "
                                       f"published (status {self._container.status}).", tail)
            time.sleep(0.05)
        for binding in ports.values():
            if binding["HostIp"] not in ("127.0.0.1", ""):
                raise ServerStartError(f"Docker published a port on {binding['HostIp']}, not 127.0.0.1.")
        self.http_port = int(ports["http"]["HostPort"])
        self.grpc_port = int(ports["grpc"]["HostPort"])
        self.metrics_port = int(ports["metrics"]["HostPort"])

    def _pump_logs(self) -> None:
        """Copy the container's output into the log file as it comes (ends when the container does)."""
        container_id = self._container.id
        try:
            client = docker.from_env(timeout=None)  # no read timeout: Triton may be quiet for hours
            try:
                stream = client.api.logs(container_id, stdout=True, stderr=True, stream=True, follow=True)
                with open(self.logs.path, "ab") as log:
                    for chunk in stream:
                        log.write(chunk)
                        log.flush()
            finally:
                client.close()
        except Exception:  # the engine went away or the container was removed: nothing more to copy
            pass

    def _drain_logs(self, timeout_s: float = 3.0) -> None:
        if self._log_thread is not None:
            self._log_thread.join(timeout_s)

    def _container_logs(self, lines: int = 25) -> str:
        try:
            return self._container.logs(tail=lines).decode(errors="replace").rstrip()
        except Exception:
            return ""

    def _failure_tail(self) -> str:
        self._drain_logs()
        return self.logs.tail(25) or self._container_logs()

    def _exit_summary(self) -> str:
        try:
            state = self._client.api.inspect_container(self._container.id)["State"]
        except Exception:
            return "the container is gone"
        text = f"exit code {state.get('ExitCode')}"
        if state.get("OOMKilled"):
            text += ", killed for lack of memory"
        if state.get("Error"):
            text += f", {state['Error']}"
        return text

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                raise ServerStartError(
                    f"The Triton container ({self.image}) exited during start-up ({self._exit_summary()}); "
                    f"see {self.logs.path}.", self._failure_tail())
            if self.ready():
                return
            time.sleep(0.05)
        raise ServerStartError(
            f"Triton in the container was not ready after {timeout_s:.0f} s; raise timeout_s or read {self.logs.path}.",
            self._failure_tail(),
        )

    def start(self, timeout_s: float = 60.0) -> "DockerServer":
        try:
            super().start(timeout_s)
        except BaseException:
            self.stop()  # the base class stops only after a launch; a failed launch may have made a container
            raise
        return self

    def _remove_container(self) -> None:
        if self._container is None:
            return
        try:
            self._container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except (docker.errors.APIError, requests.exceptions.RequestException):
            pass  # cleanup() at the next launch removes it (it carries our labels)

    def _end_process(self) -> None:
        if self._container is not None:
            try:
                self._container.stop(timeout=10)  # SIGTERM; Triton exits within --exit-timeout-secs
            except (docker.errors.APIError, requests.exceptions.RequestException):
                pass
            self._drain_logs()
            self._remove_container()
        if self._client is not None:
            self._client.close()

    def _terminate(self) -> None:
        died_on_its_own = self._ran and (self._exited or not self._running())
        self._end_process()
        if self._own_workdir and not died_on_its_own:  # keep the log of a crash for reading
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _running(self) -> bool:
        try:
            state = self._client.api.inspect_container(self._container.id)["State"]
        except docker.errors.NotFound:
            self._exited = True
            return False
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return False
        if not state.get("Running") or state.get("Restarting"):
            self._exited = True
            return False
        return True

    @property
    def alive(self) -> bool:
        if self._container is None or self._stopped or self._exited:
            return False
        return self._running()

    # -- C++ builds inside the container -------------------------------------------------------------

    def _exec(self, argv: list[str], workdir: str | None = None) -> tuple[int, str, str]:
        if not self.alive:
            raise ServerNotRunningError("The Triton container is not running; start a server first.", self.logs.tail(25))
        code, (out, err) = self._container.exec_run(argv, workdir=workdir, demux=True, user=self.user or "")
        return code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")

    def _container_compiler(self) -> tuple[str, str]:
        if self._compiler is None:
            cxx = self.environment.get("CXX", "g++")
            code, out, err = self._exec([cxx, "--version"])
            if code != 0:
                raise BuildError(
                    f"The image {self.image} has no C++ compiler ({cxx}: {(err or out).strip()[:200]}). C++ backends "
                    f"must be compiled where they run: use {OFFLINE_IMAGE!r} (it has g++) or the lab image "
                    f"(docker/Dockerfile), or install g++ in your image."
                )
            self._compiler = (cxx, out.splitlines()[0] if out else cxx)
        return self._compiler

    def _stage_include(self, folder: Path) -> str:
        """Copy an include folder into the mounted build cache (by content); its path in the container."""
        from ..native import build as native

        digest = native._digest(native._header_bytes(folder))[:16]
        target = self.build_root / "include" / digest
        if not target.exists():
            partial = target.with_name(digest + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(folder, partial)
            partial.rename(target)
        return _container_path(target, f"/labkit/builds/include/{digest}")

    def build(
        self,
        backend: str,
        source: str | Path,
        *,
        headers: str | Path | None = None,
        **options: Any,
    ) -> Any:
        """Compile ``libtriton_<backend>.so`` with the container's own g++ (so the C++ runtime matches
        the one the backend runs with). Same options and caching as ``labkit.native.build_backend``;
        ``headers="image"`` takes Triton's headers from the image (``/opt/tritonserver/include``, NGC).
        """
        from ..native import build as native

        toolchain = _ContainerToolchain(self)
        image_includes = ["/opt/tritonserver/include"] if headers == "image" else []
        cache = self.build_root / self._container.image.id.split(":")[-1][:12]
        return native.build_backend(
            backend, source, headers=None if headers == "image" else headers, cache=cache,
            toolchain=toolchain, extra_includes=image_includes, **options,
        )


class _ContainerToolchain:
    """labkit.native.build.Toolchain for a running container: its compiler, paths as mounted there."""

    label = " in the container"

    def __init__(self, server: DockerServer) -> None:
        self.server = server
        self.cxx, self._version = server._container_compiler()

    def version(self) -> str:
        return self._version

    def cache_key(self) -> bytes:
        return self.server._container.image.id.encode()

    def include(self, folder: Path) -> str:
        return self.server._stage_include(folder)

    def path(self, host_path: Path) -> str:
        root = self.server.build_root
        return _container_path(host_path, "/labkit/builds/" + host_path.relative_to(root).as_posix())

    def run(self, argv: list[str], cwd: Path) -> tuple[int, str]:
        argv = [self.cxx if argv[0] == "c++" else argv[0], *argv[1:]]
        code, out, err = self.server._exec(argv, workdir=self.path(cwd))
        return code, err + out


__all__ = [
    "DEFAULT_IMAGE",
    "DockerServer",
    "OFFLINE_IMAGE",
    "cleanup",
    "connect",
    "engine_status",
    "ensure_image",
    "leftovers",
    "owner_dead",
    "pull_image",
]
