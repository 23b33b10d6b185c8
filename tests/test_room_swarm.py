"""The room on Docker Swarm (`labkit room up --swarm`), on a real three-engine swarm that tests/swarm_support.py
builds in network namespaces (the session's `swarm` fixture, tests/conftest.py): labs spread over the two
workers and reached through the hub's proxy on the manager, each participant's node in `room status`, `room
down` leaving nothing on any node, cancelled and failed spawns, images copied to the workers, the hub restarted.
The other swarm tests: test_room_swarm_nodes_lost.py (drain, kill, rehome) and test_room_swarm_graders.py. Selected
with `pytest -k swarm`; all of them share one swarm and one test worker (their xdist group). Needs root
(namespaces, engines): skipped without, failed in CI."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
import signal
import sys
import tarfile
import time

import docker.errors
import pytest
import requests
from swarm_room_support import LOGINS, EngineGate, SwarmRoom, lab_services, labkit_cli, set_availability
from swarm_support import Swarm
from waiting_support import eventually

from labkit.errors import SetupError
from labkit.plumbing.ports import free_ports
from labkit.room.hub import lifecycle, node_engines, process as hub_process, processes
from labkit.room.protocol import ROOM_LABEL, WORK_LABEL
from labkit.room.settings import RoomSettings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def room(swarm, tmp_path_factory):
    (port,) = free_ports(1)  # in the manager's namespace nothing else listens: any free number will do
    started = SwarmRoom(swarm, tmp_path_factory.mktemp("swarm-room"), port)
    try:
        yield started
    finally:
        started.down("--delete-work")


def test_swarm_spread_labs_over_two_workers_each_reached_through_the_proxy(room, swarm):
    for login in LOGINS:
        assert room.request("POST", f"hub/api/users/{login}/server").status_code in (201, 202)
    eventually(lambda: room.ready(LOGINS), f"labs {LOGINS} ready (see {room.directory / 'hub.log'})", 300, interval_s=1)
    services = {s.attrs["Spec"]["Labels"][f"{ROOM_LABEL}.user"]: s for s in lab_services(swarm, room.record["room_id"])}
    assert sorted(services) == list(LOGINS)
    nodes = {}
    for login, service in services.items():
        spec = service.attrs["Spec"]
        assert spec["EndpointSpec"]["Mode"] == "dnsrr"
        assert "node.role==worker" in spec["TaskTemplate"]["Placement"]["Constraints"]
        (task,) = service.tasks(filters={"desired-state": "running"})
        nodes[login] = swarm.node_of(task["NodeID"])
        # the work volume is on that node, labelled as the room's work (room down keeps it)
        volume = swarm.client(nodes[login]).volumes.get(f"labkit-room-{room.record['room_id']}-{login}")
        assert volume.attrs["Labels"][WORK_LABEL] == room.record["room_id"]
    assert {n.name for n in nodes.values()} == {w.name for w in swarm.workers}, nodes
    # each lab answers through the hub's proxy on the manager, with its participant's token; the notebooks are there
    for login in LOGINS:
        token = room.request("POST", f"hub/api/users/{login}/tokens", json={"expires_in": 600}).json()["token"]
        listing = room.request("GET", f"user/{login}/api/contents/", token)
        assert listing.status_code == 200, listing.text
        assert any(item["name"].endswith(".ipynb") for item in listing.json()["content"])
        saved = room.request(
            "PUT",
            f"user/{login}/api/contents/mine.txt",
            token,
            json={"type": "file", "format": "text", "content": login},
        )
        assert saved.status_code in (200, 201)
    # the teacher sees who runs where
    status = labkit_cli(swarm, "room", "status", "--dir", str(room.directory))
    for login, node in nodes.items():
        line = next(line for line in status.splitlines() if line.strip().startswith(login))
        assert "running" in line and f"({node.address})" in line, status


def test_swarm_up_on_a_worker_or_off_any_swarm_is_refused_before_anything_starts(swarm, tmp_path, monkeypatch, engine):
    """`room up --swarm` against a worker's engine, or the default engine (in no swarm): a SetupError saying
    it needs the manager, and no room.json, hub or service."""
    (port,) = free_ports(1)
    for url in (swarm.workers[0].url, None):
        if url:
            monkeypatch.setenv("DOCKER_HOST", url)
        else:
            monkeypatch.delenv("DOCKER_HOST", raising=False)
        if url is None and (engine.info().get("Swarm") or {}).get("ControlAvailable"):
            continue  # the default engine manages a swarm of its own: not this check's case
        settings = RoomSettings(directory=tmp_path / "room", port=port, swarm=True, participants=LOGINS)
        with pytest.raises(SetupError) as refused:
            lifecycle.up(settings)
        assert refused.value.reason == "not a manager" and refused.value.missing == "Docker swarm manager"
        assert not (tmp_path / "room" / "room.json").exists()
        assert hub_process.hub_pid(tmp_path / "room") is None


def test_swarm_clean_room_down_leaves_nothing_on_any_node(swarm, tmp_path):
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port)
    room_id = room.record["room_id"]
    for login in LOGINS:
        assert room.request("POST", f"hub/api/users/{login}/server").status_code in (201, 202)
    eventually(lambda: room.ready(LOGINS), "labs ready", 300, interval_s=1)
    held = {
        n.name for n in swarm.workers if swarm.client(n).containers.list(filters={"label": f"{ROOM_LABEL}={room_id}"})
    }
    assert held == {w.name for w in swarm.workers}
    said = room.down()
    assert all(f"service labkit-{room_id}-{login}" in said for login in LOGINS), said

    def nothing_left() -> bool:
        for node in swarm.nodes:
            client = swarm.client(node)
            label = {"label": f"{ROOM_LABEL}={room_id}"}
            if client.containers.list(all=True, filters=label) or client.networks.list(filters=label):
                return False
        manager = swarm.client(swarm.manager)
        return not manager.services.list(filters=label) and not manager.configs.list(filters=label)

    eventually(nothing_left, "the room's services, containers and networks gone from every node", 60, interval_s=1)
    # the work stays on its node (room down keeps it without --delete-work), and no hub runs
    kept = [
        v.name
        for n in swarm.workers
        for v in swarm.client(n).volumes.list(filters={"label": f"{WORK_LABEL}={room_id}"})
    ]
    assert sorted(kept) == [f"labkit-room-{room_id}-{login}" for login in LOGINS]
    with pytest.raises(requests.ConnectionError):
        room.request("GET", "hub/api/")
    # --delete-work given one worker's engine only: the work goes there, and the other's is named with its node
    first, second = swarm.workers
    said = room.down("--delete-work", f"--node-engine={first.url}")
    assert _work(swarm, first, room_id) == []
    (kept_there,) = _work(swarm, second, room_id)
    assert f"({second.address})" in next(line for line in said.splitlines() if kept_there in line), said
    # with the engines `room up` recorded: no volume of the room is left on any node
    said = room.down("--delete-work")
    assert f"removed volume {kept_there} on" in said, said
    assert [_work(swarm, node, room_id) for node in swarm.nodes] == [[], [], []]


def _work(swarm: Swarm, node, room_id: str) -> list[str]:
    """The room's volumes on ``node``, by their label or their name."""
    client = swarm.client(node)
    labelled = {v.name for v in client.volumes.list(filters={"label": f"{WORK_LABEL}={room_id}"})}
    named = {v.name for v in client.volumes.list(filters={"name": f"labkit-room-{room_id}-"})}
    return sorted(labelled | named)


def test_swarm_cancel_a_spawn_cancelled_leaves_no_service_and_the_lab_starts_on_its_node_later(swarm, tmp_path):
    """p02's node (the second worker) drained: their spawn waits; the teacher cancels it (DELETE on the
    pending server). No service is left; once the node is back, p02's lab starts there, not elsewhere."""
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port)
    room_id, second = room.record["room_id"], swarm.workers[1]
    set_availability(swarm, second, "drain")
    try:
        assert room.request("POST", "hub/api/users/p02/server").status_code == 202

        def waiting() -> bool:
            services = lab_services(swarm, room_id)
            return bool(services) and all(t["Status"]["State"] == "pending" for s in services for t in s.tasks())

        eventually(waiting, "p02's service waiting for its drained node", 60, interval_s=0.5)
        assert room.request("DELETE", "hub/api/users/p02/server").status_code in (202, 204)
        eventually(
            lambda: not lab_services(swarm, room_id), "the cancelled spawn's service removed", 60, interval_s=0.5
        )
        status = labkit_cli(swarm, "room", "status", "--dir", str(room.directory))
        assert next(line for line in status.splitlines() if line.strip().startswith("p02")).split()[1] == "stopped"
    finally:
        set_availability(swarm, second, "active")
    assert room.request("POST", "hub/api/users/p02/server").status_code in (201, 202)
    eventually(lambda: room.ready(["p02"]), "p02's lab ready once its node is back", 300, interval_s=1)
    (service,) = lab_services(swarm, room_id)
    (task,) = service.tasks(filters={"desired-state": "running"})
    assert swarm.node_of(task["NodeID"]) == second
    room.down()
    assert not lab_services(swarm, room_id)


def test_swarm_image_missing_on_the_workers_fails_the_spawn_at_once_and_leaves_no_service(swarm, tmp_path):
    """A room started on an image the workers do not hold: Swarm rejects the task (nothing is pulled), the
    participant's spawn fails well before its timeout instead of waiting for it, and no service stays."""
    (port,) = free_ports(1)
    directory = tmp_path / "room"
    room = SwarmRoom(swarm, directory, port, participants=1, image="labkit-test/not-on-any-worker:1", engines=False)
    try:
        started = room.request("POST", "hub/api/users/p01/server")

        def failed() -> bool:
            server = (room.request("GET", "hub/api/users/p01").json().get("servers") or {}).get("")
            return not server and not lab_services(swarm, room.record["room_id"])

        assert started.status_code in (202, 500)
        # well inside the spawn's own timeout (600 s): the rejected task is not waited for
        eventually(failed, "p01's failed spawn over and its service removed", 120, interval_s=1)
        status = labkit_cli(swarm, "room", "status", "--dir", str(directory))
        assert next(line for line in status.splitlines() if line.strip().startswith("p01")).split()[1] == "stopped"
    finally:
        room.down()


# --- images ---


def _small_image(client, tag: str, megabytes: int = 40):
    """An image of ``megabytes`` random bytes, built on ``client``'s engine from nothing (nothing is pulled)."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", b"FROM scratch\nCOPY blob /blob\n"), ("blob", os.urandom(megabytes << 20))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    image, _ = client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    return image


def test_swarm_images_copied_from_the_manager_to_each_worker_with_progress_engines_checked(
    swarm, tmp_path, monkeypatch, capsys
):
    """`room up --swarm --node-engine` copies the room's image from the manager into both workers at once, with
    progress; an engine that is no node of the swarm, or does not answer, is refused before anything starts;
    a worker that holds the image is left alone, and one without an engine is named."""
    manager = swarm.client(swarm.manager)
    tag = f"labkit-test/swarm-copy:{secrets.token_hex(3)}"
    image = _small_image(manager, tag)
    (port,) = free_ports(1)
    host_engine = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    directory = tmp_path / "room"
    try:
        monkeypatch.setenv("DOCKER_HOST", swarm.manager.url)
        for url, reason in ((host_engine, "not a node of this swarm"), (f"unix://{tmp_path}/none.sock", "unreachable")):
            settings = RoomSettings(
                directory=directory, port=port, swarm=True, participants=LOGINS[:1], image=tag, node_engines=(url,)
            )
            with pytest.raises(SetupError) as refused:
                lifecycle.up(settings)
            assert refused.value.reason == reason and url in refused.value.missing
            assert not (directory / "room.json").exists() and hub_process.hub_pid(directory) is None
        assert not any(tag in i.tags for w in swarm.workers for i in swarm.client(w).images.list())

        engines = [f"--node-engine={w.url}" for w in swarm.workers]
        up = ["room", "up", "--swarm", "--dir", str(directory), "--port", str(port), "--participants", "1"]
        done = swarm.run_in(swarm.manager, [sys.executable, "-m", "labkit.cli", *up, "--image", tag, *engines])
        assert done.returncode == 0, done.stdout + done.stderr
        percents = [int(p) for p in re.findall(rf"labkit: copying {re.escape(tag)}: \d+ MB.*\((\d+)%\)", done.stderr)]
        assert len(percents) >= 3 and percents == sorted(percents) and percents[-1] == 100, done.stderr
        last = [line for line in done.stderr.splitlines() if "(100%)" in line][-1]
        assert all(f"({w.address})" in last for w in swarm.workers), done.stderr  # one save, both loads
        assert [swarm.client(w).images.get(tag).id for w in swarm.workers] == [image.id, image.id]
        assert json.loads((directory / "room.json").read_text())["node_engines"] == [w.url for w in swarm.workers]

        # again with the first worker's engine only: nothing to copy there, the second worker is named
        opened = node_engines.open_engines(manager, [swarm.workers[0].url])
        capsys.readouterr()
        try:
            assert node_engines.images_to_workers(manager, opened, (tag,)) == []
        finally:
            opened[0].close()
        said = [line for line in capsys.readouterr().err.splitlines() if "could not check" in line]
        assert len(said) == 1 and f"({swarm.workers[1].address})" in said[0], said
        assert f"({swarm.workers[0].address})" not in said[0]
    finally:
        labkit_cli(swarm, "room", "down", "--dir", str(directory), "--delete-work", check=False)
        for node in swarm.nodes:
            with contextlib.suppress(docker.errors.NotFound):
                swarm.client(node).images.remove(tag, force=True)


def test_swarm_hub_restart_labs_on_both_workers_keep_working_none_restarted(room, swarm):
    """The hub killed, then `room up` again (as on one engine): both labs, one per worker, answer through the
    new hub's proxy with their participants' tokens, and neither was restarted (same service, same task)."""
    if not room.ready(LOGINS):
        for login in LOGINS:
            room.request("POST", f"hub/api/users/{login}/server")
        eventually(lambda: room.ready(LOGINS), "labs ready", 300, interval_s=1)
    tokens = {
        login: room.request("POST", f"hub/api/users/{login}/tokens", json={"expires_in": 900}).json()["token"]
        for login in LOGINS
    }

    def labs() -> dict[str, tuple[str, str, str]]:
        found = {}
        for service in lab_services(swarm, room.record["room_id"]):
            (task,) = service.tasks(filters={"desired-state": "running"})
            found[service.attrs["Spec"]["Labels"][f"{ROOM_LABEL}.user"]] = (service.id, task["ID"], task["NodeID"])
        return found

    before = labs()
    assert sorted(before) == list(LOGINS) and len({node for _, _, node in before.values()}) == 2
    hub = next(r for r in processes.read(processes.folder_of(room.directory)) if r.role == "hub")
    os.kill(hub.pid, signal.SIGKILL)
    eventually(lambda: processes.running(hub) is None, "the hub to die", 30)
    room.up()  # ends what the dead hub left running (its proxy, the board), and starts a new hub
    assert room.record["hub_pid"] != hub.pid
    for login in LOGINS:
        listing = room.request("GET", f"user/{login}/api/contents/", tokens[login])
        assert listing.status_code == 200, listing.text
    assert labs() == before
    status = labkit_cli(swarm, "room", "status", "--dir", str(room.directory))
    for login, (_, _, node) in before.items():
        line = next(line for line in status.splitlines() if line.strip().startswith(login))
        assert "running" in line and f"({swarm.node_of(node).address})" in line, status


def test_swarm_cancel_during_create_leaves_no_service(swarm, tmp_path):
    """The teacher cancels a spawn while the hub's call creating the lab's service is in flight: a gate in front of
    the manager's engine holds that call until the cancel has landed (the hub answered the DELETE), then lets it
    through. The engine creates the service, and the spawner removes it: none is left, the lab is stopped."""
    gate = EngineGate(swarm.manager.socket, swarm.manager.socket.with_name(f"gate-{secrets.token_hex(3)}.sock"))
    (port,) = free_ports(1)
    room = SwarmRoom(swarm, tmp_path / "room", port, participants=1, docker_host=gate.url)
    room_id, since = room.record["room_id"], int(time.time())
    try:
        assert room.request("POST", "hub/api/users/p01/server").status_code == 202
        assert gate.held.wait(120), "the hub never asked the engine to create p01's service"
        assert not lab_services(swarm, room_id)  # the call is in flight: the engine has not seen it
        # the hub cancels the spawn, then answers (202: the lab is still stopping) while the call is held
        cancelled = room.request("DELETE", "hub/api/users/p01/server")
        assert cancelled.status_code in (202, 204), cancelled.text + _hub_log(room)
        assert not lab_services(swarm, room_id) and gate.held.is_set()
        gate.release()

        def gone() -> bool:
            server = (room.request("GET", "hub/api/users/p01").json().get("servers") or {}).get("")
            return not server and not lab_services(swarm, room_id)

        eventually(gone, "the cancelled spawn's service removed, and p01 stopped", 120, interval_s=0.5)
        events = swarm.client(swarm.manager).events(
            since=since, until=int(time.time()) + 1, filters={"type": "service"}, decode=True
        )
        actions = [e["Action"] for e in events if e["Actor"]["Attributes"].get("name") == f"labkit-{room_id}-p01"]
        assert actions[0] == "create" and actions[-1] == "remove", actions  # it was created after the cancel
        status = labkit_cli(swarm, "room", "status", "--dir", str(room.directory), docker_host=gate.url)
        assert next(line for line in status.splitlines() if line.strip().startswith("p01")).split()[1] == "stopped"
    finally:
        gate.release()
        room.down("--delete-work")
        gate.close()
    assert gate.seen and all(b"/services/create" in line for line in gate.seen)


def _hub_log(room: SwarmRoom, lines: int = 40) -> str:
    text = (room.directory / "hub.log").read_text(errors="replace")
    return "\nhub.log:\n" + "\n".join(text.splitlines()[-lines:])
