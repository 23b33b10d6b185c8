"""Notebook 12's backend attributes, without a server: what a load showed is judged against the instances
Triton made of the group, so a KIND_GPU group counts its instances on every GPU (two GPUs: four)."""

from __future__ import annotations

from labkit.course.lessons.backend_attributes import INSTANCE_BYTES, MODEL_BYTES, Attributes


def _shown(group: dict, instances: int, parallel: bool = True) -> Attributes:
    threads = {f"m_0_{k}": (100 + k if parallel else 100) for k in range(instances)}
    memory = [{"type": "CPU", "id": 0, "byte_size": MODEL_BYTES + instances * INSTANCE_BYTES}]
    return Attributes("m", parallel, "DEVICE_BLOCKING", group, threads, memory, None)


def test_a_cpu_group_makes_count_instances():
    shown = _shown({"kind": "KIND_CPU", "count": 3, "gpus": []}, 3)
    assert (shown.gpus, shown.instances, shown.ok) == (0, 3, True)


def test_a_gpu_group_makes_count_instances_on_each_gpu():
    for gpus in ([0], [0, 1]):
        group = {"kind": "KIND_GPU", "count": 2, "gpus": gpus}
        shown = _shown(group, 2 * len(gpus))
        assert (shown.gpus, shown.instances, shown.ok) == (len(gpus), 2 * len(gpus), True)
        assert _shown(group, 2 * len(gpus), parallel=False).ok
        assert not _shown(group, 2).ok or len(gpus) == 1  # two instances are too few on two GPUs
