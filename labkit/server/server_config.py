"""What a labkit server is told to be, and Triton's command line rendered from it.

``ServerConfig`` holds the person's choices (frozen: a changed choice is a new config); ``TritonPlace``
what a runtime decides at launch (paths as Triton sees them, where it listens). ``argv`` puts the two
together and is a pure function, so every option labkit gives Triton is unit-tested in one place.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import OptionError

_prefixes = itertools.count(1)


def _shm_prefix() -> str:
    # Triton's default region name is the same for every server on a machine: two servers would
    # share (and corrupt) one region.
    return f"labkit_{os.getpid()}_{next(_prefixes)}_"


#: python_backend's ``--backend-config=python,KEY=VALUE`` settings that a ServerConfig field holds, by key.
PYTHON_BACKEND_SETTINGS = {
    "shm-default-byte-size": "shm_default_byte_size",
    "shm-growth-byte-size": "shm_growth_byte_size",
    "stub-timeout-seconds": "stub_timeout_s",
}


@dataclass(frozen=True)
class ServerConfig:
    """A server's options, whichever runtime runs Triton.

    auto_complete: let backends fill in what a config leaves out. Off by default: every config then
        serves as written (lesson 19 prints each option labkit gives Triton, and why).
    log_verbose, extra_args: Triton's ``--log-verbose`` and any further command-line options.
    request_timeout_s: how long labkit's requests wait for an answer by default (each call can
        override it); then they raise RequestTimeoutError.
    load_timeout_s: how long a model load may take by default (``load(timeout_s=)`` overrides it);
        then it raises LoadTimeoutError, after ending a stuck Python ``initialize``.
    exit_timeout_s: Triton's own ``--exit-timeout-secs``.
    http_port, grpc_port, metrics_port: where Triton listens (on ``host``); 0 (the default) lets labkit
        pick a free port. A port given that another process holds fails the start at once with
        PortTakenError (no retry on other ports). ``labkit serve`` asks for Triton's 8000/8001/8002.
    shm_prefix: the Python backend's ``shm-region-prefix-name``: labkit gives each server its own
        (``labkit_<pid>_<n>_``), as python_backend's README asks of servers that share ``/dev/shm``.
    shm_default_byte_size, shm_growth_byte_size, stub_timeout_s: the Python backend's
        ``shm-default-byte-size`` (each instance's region to begin with; Triton's default 1 MiB),
        ``shm-growth-byte-size`` (the step it grows by; 1 MiB) and ``stub-timeout-seconds`` (how long Triton
        waits for a stub to answer; 30 s). None: Triton's default. All go to Triton as ``--backend-config=python,KEY=VALUE``.
    backend_directory: a folder of backends built outside labkit (``<dir>/<name>/libtriton_<name>.so``).
        Triton's ``--backend-directory`` stays labkit's own folder (it holds labkit's Python backend):
        each ``<dir>/<name>/`` appears in it at launch as a folder of links (labkit.server.user_backends);
        nothing is written into ``<dir>``.
    """

    host: str = "127.0.0.1"
    auto_complete: bool = False
    log_verbose: int = 0
    extra_args: tuple[str, ...] = ()
    request_timeout_s: float = 30.0
    load_timeout_s: float = 120.0
    exit_timeout_s: int = 5
    shm_prefix: str = field(default_factory=_shm_prefix)
    shm_default_byte_size: int | None = None
    shm_growth_byte_size: int | None = None
    stub_timeout_s: int | None = None
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    backend_directory: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_args", tuple(self.extra_args or ()))
        if self.backend_directory is not None:
            object.__setattr__(self, "backend_directory", str(self.backend_directory))
        for name, port in self.ports.items():
            if not isinstance(port, int) or not 0 <= port <= 65535:
                raise OptionError(
                    option=f"{name}_port", value=port, valid="a port number from 1 to 65535 (0: a free one)"
                )
        for name, value in self.python_backend_config.items():
            if name != "shm-region-prefix-name" and (
                not isinstance(value, int) or isinstance(value, bool) or value <= 0
            ):
                raise OptionError(
                    option=name, value=value, valid="a whole number above 0 (or None for Triton's default)"
                )
        fixed = [port for port in self.ports.values() if port]
        if len(set(fixed)) != len(fixed):
            raise OptionError(
                option="http_port, grpc_port and metrics_port", value=self.ports, valid="three different ports"
            )

    @property
    def ports(self) -> dict[str, int]:
        """The ports asked for, by service (``http``, ``grpc``, ``metrics``); 0: any free one."""
        return {"http": self.http_port, "grpc": self.grpc_port, "metrics": self.metrics_port}

    @property
    def python_backend_config(self) -> dict[str, int | str]:
        """What goes to Triton as ``--backend-config=python,KEY=VALUE``, by python_backend's key names."""
        values = {
            "shm-region-prefix-name": self.shm_prefix,
            **{key: getattr(self, name) for key, name in PYTHON_BACKEND_SETTINGS.items()},
        }
        return {key: value for key, value in values.items() if value is not None}

    @classmethod
    def split(cls, options: dict[str, Any]) -> tuple[ServerConfig, dict[str, Any]]:
        """``options`` as a launcher takes them: the config, and what is left for its runtime."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in options.items() if k in names}), {
            k: v for k, v in options.items() if k not in names
        }

    def with_(self, **changes: Any) -> ServerConfig:
        """A copy with ``changes`` (e.g. ``lab.config = lab.config.with_(load_timeout_s=5)``)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class TritonPlace:
    """What a runtime decides: paths as Triton sees them, the address it listens on, its three ports."""

    repository: str
    backend_directory: str
    address: str
    http_port: int
    grpc_port: int
    metrics_port: int
    gpu_metrics: bool = False


def argv(config: ServerConfig, place: TritonPlace, binary: str = "tritonserver") -> list[str]:
    """Triton's command line: labkit's fixed choices (explicit model control, strict readiness, no
    auto-complete unless asked) with ``config`` and ``place``."""
    return [
        binary,
        f"--model-repository={place.repository}",
        f"--backend-directory={place.backend_directory}",
        "--model-control-mode=explicit",
        # Auto-complete on lets a broken model.py hang loads for minutes in 23.12.
        *([] if config.auto_complete else ["--disable-auto-complete-config"]),
        "--strict-readiness=true",
        f"--http-address={place.address}",
        f"--grpc-address={place.address}",
        f"--metrics-address={place.address}",
        f"--http-port={place.http_port}",
        f"--grpc-port={place.grpc_port}",
        f"--metrics-port={place.metrics_port}",
        f"--allow-gpu-metrics={'true' if place.gpu_metrics else 'false'}",
        *(f"--backend-config=python,{key}={value}" for key, value in config.python_backend_config.items()),
        f"--log-verbose={config.log_verbose}",
        f"--exit-timeout-secs={config.exit_timeout_s}",
        *config.extra_args,
    ]
