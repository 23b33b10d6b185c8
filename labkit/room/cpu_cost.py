"""What judging costs in CPU: core-seconds (user + system) read from the kernel's own accounting.

A room's judging containers (its graders and the board's notebook scanner) run under one cgroup parent of
their own (``room_cgroup``: Docker's ``--cgroup-parent``). The kernel charges every task's CPU time to each of
its cgroup's ancestors as it runs, so that parent's counter keeps the time of containers that ended and were
removed: two readings of it give the whole cost between them, however many graders came and went. The board
itself is a process on the engine's machine, read by its pid (``psutil``: its own time and that of children
it waited for).

    meter = CpuMeter(cgroups={"graders": cgroup_dir(room_cgroup(room_id, driver), version)}, pids={"board": pid})
    before = meter.sample()
    ...                                   # the saves, their verdicts
    cost = meter.since(before)            # {"graders": 7.9, "board": 0.4}: core-seconds each

The readings are this machine's files: the engine must run here (a room on one machine). On a swarm the graders
run on other machines: each grader reads its own container's cgroup (``own_cpu_s``) just before it answers, and
puts the figure in its result; the board adds them up (labkit.room.board.progress's ``Cost``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ..docker.engine_errors import ENGINE_ERRORS
from ..errors import SetupError

CGROUP_ROOT = Path("/sys/fs/cgroup")


def engine_cgroups(client: Any) -> tuple[str, str]:
    """The engine's cgroup driver and version (``docker info``: "cgroupfs" or "systemd", "1" or "2"); an
    engine that does not say is taken as Docker's default (cgroupfs, v1)."""
    try:
        info = client.info()
    except ENGINE_ERRORS:
        info = {}
    return str(info.get("CgroupDriver") or "cgroupfs"), str(info.get("CgroupVersion") or "1")


def room_cgroup(room_id: str, driver: str = "cgroupfs") -> str:
    """The cgroup parent of room ``room_id``'s judging containers, as Docker's ``cgroup_parent`` takes it for
    the engine's cgroup ``driver``: a path for cgroupfs, a slice for systemd; "" (the engine's default) for
    an engine without cgroups of its own (rootless Docker's "none")."""
    name = f"labkit-room-{room_id}"
    if driver == "none":
        return ""
    return f"{name}.slice" if driver == "systemd" else f"/{name}"


def cgroup_dir(parent: str, version: str = "1", root: Path = CGROUP_ROOT) -> Path:
    """The folder holding the CPU accounting of cgroup ``parent`` (as ``room_cgroup`` names it) on this machine:
    cgroup v1's cpuacct hierarchy, or v2's single one (``docker info``'s CgroupVersion)."""
    relative = parent.strip("/")
    if relative.endswith(".slice"):  # systemd nests a slice in those its dashes name: a-b.slice in a.slice
        parts = relative[: -len(".slice")].split("-")
        relative = "/".join("-".join(parts[: i + 1]) + ".slice" for i in range(len(parts)))
    return (root / relative) if version == "2" else (root / "cpuacct" / relative)


def cgroup_cpu_s(folder: Path) -> float:
    """Core-seconds (user + system) charged to the cgroup at ``folder`` and everything that ran under it."""
    try:
        if (folder / "cpuacct.usage").exists():  # v1: nanoseconds
            return int((folder / "cpuacct.usage").read_text()) / 1e9
        for line in (folder / "cpu.stat").read_text().splitlines():  # v2: microseconds
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError) as exc:
        raise SetupError(
            needed_by="The CPU measurement",
            missing=str(folder),
            reason="unreadable",
            detail=str(exc),
            remedy="Run it on the machine of the Docker engine, with /sys/fs/cgroup mounted",
        ) from None
    return 0.0  # a v2 cgroup without usage yet: nothing has run in it


def own_cgroup_dir(proc: Path = Path("/proc/self")) -> Path | None:
    """The folder of this process's own cgroup CPU accounting, where this mount namespace shows it (in a
    container: its own cgroup, which Docker mounts at /sys/fs/cgroup/cpu,cpuacct on v1, or /sys/fs/cgroup with a
    private cgroup namespace on v2); None when /proc does not say. cgroup v1's cpuacct first, else v2's."""
    try:
        own = [line.split(":", 2) for line in (proc / "cgroup").read_text().splitlines() if line.count(":") >= 2]
        mounts = [line.split(" - ", 1) for line in (proc / "mountinfo").read_text().splitlines() if " - " in line]
    except OSError:
        return None
    v1 = next((path for _, controllers, path in own if "cpuacct" in controllers.split(",")), None)
    v2 = next((path for number, controllers, path in own if number == "0" and not controllers), None)
    for path, kind in ((v1, "cgroup"), (v2, "cgroup2")):
        for head, tail in mounts:
            fields, super_fields = head.split(), tail.split()
            if path is None or len(fields) < 5 or len(super_fields) < 3 or super_fields[0] != kind:
                continue
            if kind == "cgroup" and "cpuacct" not in super_fields[2].split(","):
                continue
            root, point = fields[3], Path(fields[4])
            if path == root or path.startswith(root.rstrip("/") + "/"):
                return point / path[len(root) :].lstrip("/")
    return None


def own_cpu_s(proc: Path = Path("/proc/self")) -> float | None:
    """Core-seconds of this process's own cgroup (in a grader's container: the container's, every process it ran
    included), or None when it cannot be read."""
    folder = own_cgroup_dir(proc)
    if folder is None:
        return None
    try:
        return round(cgroup_cpu_s(folder), 3)
    except SetupError:
        return None


def process_cpu_s(pid: int) -> float:
    """Core-seconds of process ``pid``, and of the children it has waited for; 0 once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system + times.children_user + times.children_system


@dataclass(frozen=True)
class CpuMeter:
    """Reads the CPU time of named ``cgroups`` (folders, see ``cgroup_dir``) and processes (``pids``)."""

    cgroups: dict[str, Path] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    def sample(self) -> dict[str, float]:
        """Each source's core-seconds so far."""
        return {
            **{name: cgroup_cpu_s(folder) for name, folder in self.cgroups.items()},
            **{name: process_cpu_s(pid) for name, pid in self.pids.items()},
        }

    def since(self, before: dict[str, float]) -> dict[str, float]:
        """Each source's core-seconds since the sample ``before``."""
        now = self.sample()
        return {name: round(max(0.0, now[name] - before.get(name, 0.0)), 3) for name in now}


def remove_cgroup(parent: str, root: Path = CGROUP_ROOT) -> None:
    """Remove cgroupfs parent ``parent`` once its containers are gone (Docker makes one, never removes it): from
    every v1 hierarchy, or v2's. Best effort: a parent still in use, not here, or not ours to remove stays."""
    if parent.endswith(".slice") or not parent.strip("/"):
        return  # systemd's slices are systemd's
    relative = parent.strip("/")
    for folder in [root / relative, *(h / relative for h in root.iterdir() if h.is_dir())]:
        try:
            folder.rmdir()
        except OSError:
            pass


def per_save(cost: dict[str, float], verdicts: int) -> float | None:
    """``cost``'s core-seconds, all sources together, per verdict (None without one)."""
    return round(sum(cost.values()) / verdicts, 3) if verdicts else None
