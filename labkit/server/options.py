"""Triton's command line, built in one place for every launcher."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TritonOptions:
    """What a launcher tells tritonserver: paths as Triton sees them, where to listen, and labkit's
    fixed choices (explicit model control, strict readiness, no auto-complete unless asked)."""

    repository: str
    backend_directory: str
    address: str
    http_port: int
    grpc_port: int
    metrics_port: int
    shm_prefix: str
    auto_complete: bool = False
    gpu_metrics: bool = False
    log_verbose: int = 0
    extra_args: list[str] = field(default_factory=list)

    def argv(self, binary: str = "tritonserver") -> list[str]:
        return [
            binary,
            f"--model-repository={self.repository}",
            f"--backend-directory={self.backend_directory}",
            "--model-control-mode=explicit",
            # Auto-complete on lets a broken model.py hang loads for minutes in 23.12.
            *([] if self.auto_complete else ["--disable-auto-complete-config"]),
            "--strict-readiness=true",
            f"--http-address={self.address}",
            f"--grpc-address={self.address}",
            f"--metrics-address={self.address}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            f"--allow-gpu-metrics={'true' if self.gpu_metrics else 'false'}",
            # Triton's default region name is the same for every server on a machine: two servers
            # would share (and corrupt) one region.
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            f"--log-verbose={self.log_verbose}",
            "--exit-timeout-secs=5",
            *self.extra_args,
        ]
