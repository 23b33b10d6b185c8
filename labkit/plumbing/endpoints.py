"""Where a running Triton answers: one value for its host and three ports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoints:
    """Triton's HTTP, gRPC and metrics ports on ``host`` (all 0 before the first start)."""

    host: str = "127.0.0.1"
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0

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
