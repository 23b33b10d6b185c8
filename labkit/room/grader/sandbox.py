"""The grader's sandbox, written once: what a grader run is (image, command, environment, an ordinary
user, /tmp as its work folder, a shared-memory size for Triton's Python stubs, limits, no network), rendered
to docker-py's ``containers.run`` arguments (labkit.room.grader.runner), to a Swarm service's
(labkit.room.grader.swarm_runner) and to a Pod's container and volumes (labkit.room.k8s.pods)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import RoomSettingsError
from ..settings import parse_size, size_bytes

USER = 1000  # the participant image's ordinary user
HOME = "/tmp/grader-home"
WORK = "/tmp"
SHM_MIB = 256  # Triton's Python backend stub keeps its tensors in /dev/shm


@dataclass(frozen=True)
class Limits:
    """What one grader run may use; ``timeout_s`` ends a run that takes longer."""

    cpu: float = 1.0
    memory: str = "2g"
    pids: int = 512
    timeout_s: float = 600.0


def memory_quantity(size: str, setting: str = "grader_memory") -> str:
    """A Docker-style size as a Kubernetes quantity (``2g`` is ``2Gi``)."""
    number, unit = parse_size(size, setting)
    return number if unit in ("", "b") else f"{number}{unit.upper()}i"


def cpu_quantity(cpu: float) -> str:
    """Cores as Kubernetes millicores (``1.5`` is ``1500m``)."""
    if isinstance(cpu, bool) or not isinstance(cpu, (int, float)) or not cpu >= 0.001:
        raise RoomSettingsError(
            problem="is not a number of cores",
            remedy="give a positive number (0.5, 2)",
            setting="grader_cpu",
            value=str(cpu),
        )
    return f"{round(cpu * 1000)}m"


@dataclass(frozen=True)
class GraderRun:
    """One grader run of ``image``: ``command`` with ``env`` added to the sandbox's own, under ``limits``."""

    image: str
    command: list[str]
    limits: Limits = Limits()
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""  # the room's (labkit.room.cpu_cost.room_cgroup): what its judging costs is read there

    @property
    def environment(self) -> dict[str, str]:
        return {"HOME": HOME, "PYTHONUNBUFFERED": "1", **self.env}

    def docker_arguments(self) -> dict[str, Any]:
        """docker-py's ``containers.run`` keyword arguments (detached): no network, no capabilities."""
        return {
            "image": self.image,
            "command": list(self.command),
            "detach": True,
            "network_mode": "none",
            "user": str(USER),
            "environment": self.environment,
            "working_dir": WORK,
            "nano_cpus": int(self.limits.cpu * 1e9),
            "mem_limit": self.limits.memory,
            "pids_limit": self.limits.pids,
            "shm_size": f"{SHM_MIB}m",
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "labels": dict(self.labels),
            **({"cgroup_parent": self.cgroup_parent} if self.cgroup_parent else {}),
        }

    def service_arguments(self) -> dict[str, Any]:
        """docker-py's ``services.create`` keyword arguments, as far as Swarm's API 1.41 (Docker 20.10) goes:
        the same user, limits (processes too) and dropped capabilities; /dev/shm a tmpfs of the same size. No
        network mode (the caller gives it a network: labkit.room.grader.swarm_runner says why), no
        no-new-privileges (API 1.44), no restart (a run is judged again by the board, not by Swarm)."""
        from docker.types import Mount, Resources, RestartPolicy

        resources = Resources(
            cpu_limit=int(self.limits.cpu * 1e9), mem_limit=size_bytes(self.limits.memory, "grader_memory")
        )
        resources["Limits"]["Pids"] = self.limits.pids  # API 1.41 has it; docker-py 7 does not name it
        return {
            "image": self.image,
            "command": list(self.command),
            "user": str(USER),
            "env": [f"{k}={v}" for k, v in self.environment.items()],
            "workdir": WORK,
            "resources": resources,
            "mounts": [Mount(target="/dev/shm", source=None, type="tmpfs", tmpfs_size=SHM_MIB * 1024**2)],
            "cap_drop": ["ALL"],
            "restart_policy": RestartPolicy(condition="none"),
            "labels": dict(self.labels),
            "container_labels": dict(self.labels),
        }

    def pod_security(self) -> dict[str, Any]:
        return {"runAsNonRoot": True, "runAsUser": USER, "seccompProfile": {"type": "RuntimeDefault"}}

    def pod_container(self, name: str) -> dict[str, Any]:
        """The Pod's container (API shape): the same command, user and environment; requests equal to the
        limits. A Pod has no process limit (``Limits.pids``: the kubelet's ``podPidsLimit`` is a node setting),
        and its network is cut by a NetworkPolicy (labkit.room.k8s.pods.network_policy)."""
        resources = {"cpu": cpu_quantity(self.limits.cpu), "memory": memory_quantity(self.limits.memory)}
        return {
            "name": name,
            "image": self.image,
            "imagePullPolicy": "IfNotPresent",
            "command": list(self.command),
            "workingDir": WORK,
            "env": [{"name": k, "value": v} for k, v in self.environment.items()],
            "resources": {"requests": resources, "limits": dict(resources)},
            "securityContext": {
                **self.pod_security(),
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
        }

    def pod_volumes(self) -> list[dict[str, Any]]:
        return [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_MIB}Mi"}}]
