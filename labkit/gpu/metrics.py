"""Triton's GPU metrics (``nv_gpu_*``, exported only where Triton sees a GPU and runs without
``--allow-gpu-metrics=false``): utilization and memory per GPU, read from parsed /metrics samples
(labkit.observe.stats.parse_metrics). Without a GPU there are none, and ``usage`` is empty."""

from __future__ import annotations

from dataclasses import dataclass

_GIB = 1024**3


@dataclass(frozen=True)
class GpuUsage:
    """One GPU at one poll: ``utilization`` (0..1, Triton's nv_gpu_utilization), memory in bytes."""

    uuid: str
    utilization: float
    memory_used: float
    memory_total: float

    def line(self, index: int) -> str:
        return (
            f"GPU {index}: {self.utilization * 100:.0f}% busy, "
            f"{self.memory_used / _GIB:.1f}/{self.memory_total / _GIB:.1f} GiB"
        )


def usage(samples: dict) -> list[GpuUsage]:
    """Each GPU in ``samples`` ({(name, sorted labels): value}), ordered by its ``gpu_uuid`` label."""
    found: dict[str, dict[str, float]] = {}
    for (name, labels), value in samples.items():
        if name in ("nv_gpu_utilization", "nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes"):
            uuid = dict(labels).get("gpu_uuid", "")
            found.setdefault(uuid, {})[name] = value
    return [
        GpuUsage(
            uuid,
            v.get("nv_gpu_utilization", 0.0),
            v.get("nv_gpu_memory_used_bytes", 0.0),
            v.get("nv_gpu_memory_total_bytes", 0.0),
        )
        for uuid, v in sorted(found.items())
    ]


def summary(gpus: list[GpuUsage]) -> str:
    """One line for all GPUs ("" when there are none, so CPU-only displays stay as they were)."""
    return "; ".join(g.line(i) for i, g in enumerate(gpus))
