"""The cost of a judged save is read from the kernel's accounting: a real container, under a room's cgroup
parent, burns a known CPU time and is removed; the parent's counter still holds that time (labkit.room.cpu_cost).
A measurement with a wide margin, not a timed assertion: the container burns 1 s of its own CPU time."""

from __future__ import annotations

import uuid

from labkit.room import cpu_cost

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"


def test_a_container_that_ended_and_was_removed_is_counted(engine, cpu_image):
    room_id = f"t{uuid.uuid4().hex[:8]}"
    driver, version = cpu_cost.engine_cgroups(engine)
    parent = cpu_cost.room_cgroup(room_id, driver)
    meter = cpu_cost.CpuMeter(cgroups={"graders": cpu_cost.cgroup_dir(parent, version)})
    run = {"detach": True, "network_mode": "none", "nano_cpus": 10**9, "cgroup_parent": parent}
    try:
        engine.containers.run(cpu_image, ["true"], remove=True, **{**run, "detach": False})  # makes the parent
        before = meter.sample()
        container = engine.containers.run(cpu_image, ["python3", "-c", BURN], **run)
        try:
            assert container.wait(timeout=120)["StatusCode"] == 0
        finally:
            container.remove(force=True)
        cost = meter.since(before)
        assert 0.8 <= cost["graders"] < 30, cost  # its second of CPU, and python's start
        assert cpu_cost.per_save(cost, 1) == cost["graders"]
    finally:
        cpu_cost.remove_cgroup(parent)
    assert not cpu_cost.cgroup_dir(parent, version).exists()  # `room down` leaves no cgroup behind
