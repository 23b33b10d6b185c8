"""`labkit room` driven as a room is driven: a real hub (JupyterHub 6.1, DockerSpawner 14), real lab
containers from labkit/lab:23.12-cpu, the hub's REST API and each participant's Jupyter server API."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import requests
from room_board_support import NOTEBOOK, Room, container_of, leftovers, room_engine, solution, wait_ready
from waiting_support import eventually, within

from labkit.errors import (
    PortTakenError,
    ServerNotRunningError,
    ServerStartError,
    SetupError,
    SubmissionError,
)
from labkit.plumbing.ports import free_ports
from labkit.room.board.notebook_sources import JupyterSource
from labkit.room.grader.runner import Grader
from labkit.room.hub import process as hub_process, processes
from labkit.room.hub.lifecycle import _replace_labs, down, status_rows, up
from labkit.room.protocol import ROOM_LABEL, WORK_LABEL
from labkit.room.settings import BOARD_SCOPES, RoomSettings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
PARTICIPANTS = RoomSettings.numbered(3)


@pytest.fixture(scope="module")
def room(lab_image, engine, tmp_path_factory):
    directory = tmp_path_factory.mktemp("room") / "room"
    settings = RoomSettings(
        participants=PARTICIPANTS,
        port=free_ports(1)[0],
        directory=directory,
        memory="1G",
        cpu=1.0,
        shm_size="256M",
        image=lab_image,
    )
    info = up(settings)
    try:
        assert hub_process.hub_answers(settings.port)
        yield Room(settings, json.loads((directory / "room.json").read_text()))
    finally:
        down(directory, delete_work=True)
    assert leftovers(engine, info.room_id) == []  # containers, networks and volumes, by label and by name
    assert hub_process.hub_pid(directory) is None


@pytest.fixture(scope="module")
def labs(room):
    """All three labs, started at once through the hub's REST API."""
    t0 = time.monotonic()
    for login in PARTICIPANTS:
        assert room.api("POST", f"users/{login}/server").status_code in (201, 202)
    wait_ready(room, PARTICIPANTS)
    room.started_s = time.monotonic() - t0
    print(f"\n3 labs ready {room.started_s:.0f} s after starting them at once")
    return room


def test_room_files(room):
    record = room.record
    assert record["teacher_token"] and record["url"].startswith("http://")
    rows = (room.settings.directory / "participants.csv").read_text().splitlines()
    assert rows[0] == "login,password" and [r.split(",")[0] for r in rows[1:]] == list(PARTICIPANTS)
    assert (room.settings.directory / "room.json").stat().st_mode & 0o077 == 0  # it holds tokens
    me = room.api("GET", "user").json()
    assert me["name"] == "teacher" and me["admin"]
    services = {s["name"] for s in room.api("GET", "services").json().values()}
    assert "idle-culler" in services


def test_password_login(room):
    session = requests.Session()
    session.get(f"{room.url}/hub/login", timeout=30)
    form = {"username": "p01", "_xsrf": session.cookies.get("_xsrf", "")}
    wrong = session.post(
        f"{room.url}/hub/login", data={**form, "password": "not-it"}, allow_redirects=False, timeout=30
    )
    assert wrong.status_code != 302
    right = session.post(
        f"{room.url}/hub/login",
        data={**form, "password": room.record["participant_password"]},
        allow_redirects=False,
        timeout=30,
    )
    assert right.status_code == 302
    teacher = {"username": "teacher", "_xsrf": form["_xsrf"], "password": room.record["participant_password"]}
    assert session.post(f"{room.url}/hub/login", data=teacher, allow_redirects=False, timeout=30).status_code != 302


def test_three_labs_start_at_once_with_the_notebooks(labs):
    assert {r["login"]: r["state"] for r in status_rows(labs.settings.directory)} == dict.fromkeys(
        PARTICIPANTS, "running"
    )
    for login in PARTICIPANTS:
        reply = labs.contents(login, labs.token_of(login))
        assert reply.status_code == 200, reply.text
        names = {item["name"] for item in reply.json()["content"]}
        assert "01_python_backend.ipynb" in names and not any(n.endswith(".solution") for n in names)


def test_another_participants_token_cannot_read_or_write(labs):
    mine, theirs = labs.token_of("p01"), labs.token_of("p02")
    note = {"type": "file", "format": "text", "content": "mine"}
    assert labs.contents("p01", mine, "note.txt", "PUT", json=note).status_code in (200, 201)
    assert labs.contents("p01", mine, "note.txt").json()["content"] == "mine"
    assert labs.contents("p01", theirs).status_code == 403
    assert labs.contents("p01", theirs, "note.txt").status_code == 403
    assert labs.contents("p01", theirs, "note.txt", "PUT", json={**note, "content": "x"}).status_code == 403
    assert labs.contents("p01", mine, "note.txt").json()["content"] == "mine"
    assert labs.api("GET", "users/p01", token=theirs).status_code == 404  # not even visible
    assert (
        requests.get(
            f"{labs.url}/services/board/",
            headers={"Authorization": f"token {theirs}"},
            allow_redirects=False,
            timeout=30,
        ).status_code
        != 200
    )
    teacher = requests.get(
        f"{labs.url}/services/board/api/progress",
        timeout=30,  # room up's managed board
        headers={"Authorization": f"token {labs.record['teacher_token']}"},
    )
    assert teacher.status_code == 200 and set(teacher.json()["participants"]) == set(PARTICIPANTS)


def test_the_container_is_limited_labelled_and_holds_no_socket_or_solution(labs, engine):
    container = container_of(engine, labs, "p02")
    config = container.attrs
    assert config["Config"]["Labels"][ROOM_LABEL] == labs.settings.room_id
    assert config["Config"]["Labels"][f"{ROOM_LABEL}.user"] == "p02"
    host = config["HostConfig"]
    assert (host["Memory"], host["CpuQuota"], host["ShmSize"]) == (1 << 30, host["CpuPeriod"], 256 << 20)
    assert labs.settings.network in config["NetworkSettings"]["Networks"]
    assert not any("docker.sock" in (m.get("Source") or "") for m in config["Mounts"])
    # only the participant's work volume: the image declares no VOLUME (no anonymous volume per lab)
    assert [m["Type"] for m in config["Mounts"]] == ["volume"]
    assert not engine.images.get(labs.settings.image).attrs["Config"].get("Volumes")
    code, out = container.exec_run(
        ["sh", "-c", "test -e /var/run/docker.sock && echo socket; find / -xdev -name '*.solution' 2>/dev/null; id -un"]
    )
    assert code == 0 and out.decode().split() == ["jovyan"]


def test_labkit_start_works_inside(labs, engine):
    script = (
        "import labkit\nlab = labkit.start(repository=labkit.reference_repository())\nlab.load('add_sub')\n"
        "r = labkit.check_add_sub(lab)\nlab.stop()\nprint('ANSWER', r.output0.tolist())\n"
    )
    code, out = container_of(engine, labs, "p03").exec_run(["python3", "-c", script])
    assert code == 0, out.decode()[-2000:]
    assert "ANSWER [1.5, 2.25, 5.0, 12.0]" in out.decode()


def test_a_restarted_lab_keeps_the_participants_work(labs, engine):
    token = labs.token_of("p01")
    changed = {"type": "file", "format": "text", "content": "my own version"}
    assert labs.contents("p01", token, "01_python_backend.ipynb", "PUT", json=changed).status_code in (200, 201)
    assert labs.contents("p01", token, "03_dynamic_batching.ipynb", "DELETE").status_code == 204
    assert labs.api("DELETE", "users/p01/server").status_code in (202, 204)
    within(lambda: not labs.api("GET", "users/p01").json().get("servers"), 300, "p01's lab to stop", interval_s=1)
    assert engine.containers.get(f"{labs.settings.prefix}-p01").status == "exited"  # kept, for a fast restart
    assert labs.api("POST", "users/p01/server").status_code in (201, 202)
    wait_ready(labs, ["p01"])
    token = labs.token_of("p01")
    as_text = {"type": "file", "format": "text"}
    assert labs.contents("p01", token, "01_python_backend.ipynb", params=as_text).json()["content"] == "my own version"
    assert labs.contents("p01", token, "03_dynamic_batching.ipynb").status_code == 404  # not copied again


def test_labs_made_for_another_hub_address_are_replaced_their_work_kept(lab_image, engine, tmp_path):
    """When `room up` cannot give the hub its earlier address (the port taken meanwhile), the labs made for
    that address could never reach it: they are removed (their work volumes stay, the hub starts a new lab
    at the next visit); a lab made for this address, and the room's other containers, stay."""
    settings = RoomSettings(participants=("a1", "a2"), directory=tmp_path / "moved", image=lab_image)
    labels = {ROOM_LABEL: settings.room_id}
    made = []
    try:
        for login, hub_at in (("a1", "172.30.0.1:40001"), ("a2", "172.30.0.1:40002")):
            engine.volumes.create(settings.volume(login), labels={WORK_LABEL: settings.room_id})
            made.append(
                engine.containers.create(
                    lab_image,
                    "true",
                    name=f"{settings.prefix}-{login}",
                    environment={"JUPYTERHUB_API_URL": f"http://{hub_at}/hub/api"},
                    labels={**labels, f"{ROOM_LABEL}.user": login},
                    volumes={settings.volume(login): {"bind": "/home/jovyan/work", "mode": "rw"}},
                )
            )
        made.append(engine.containers.create(lab_image, "true", labels={**labels, "labkit.room.role": "scan"}))
        assert _replace_labs(engine, settings, "172.30.0.1:40002") == [f"{settings.prefix}-a1"]
        left = {
            c.name
            for c in engine.containers.list(
                all=True, ignore_removed=True, filters={"label": f"{ROOM_LABEL}={settings.room_id}"}
            )
        }
        assert left == {f"{settings.prefix}-a2", made[-1].name}
        assert {v.name for v in engine.volumes.list(filters={"label": f"{WORK_LABEL}={settings.room_id}"})} == {
            settings.volume("a1"),
            settings.volume("a2"),
        }
    finally:
        down(settings.directory, delete_work=True)
    assert leftovers(engine, settings.room_id) == []


def test_refusals(room, lab_image, tmp_path):
    taken = RoomSettings(participants=("a1",), port=room.settings.port, directory=tmp_path / "other")
    with pytest.raises(PortTakenError) as exc:
        up(taken)
    assert exc.value.port == room.settings.port and exc.value.service == "room"
    assert not (tmp_path / "other").exists()  # refused before anything was made
    with pytest.raises(ServerStartError):
        up(room.settings)  # this room's hub already runs
    missing = taken.with_(port=free_ports(1)[0], image="labkit/no-such-image:0")
    try:
        with pytest.raises(SetupError) as no_image:
            up(missing)
        assert no_image.value.missing == "labkit/no-such-image:0"
    finally:
        down(missing.directory, delete_work=True)
    with pytest.raises(ServerNotRunningError):
        status_rows(_copy_room_file(room, tmp_path / "stopped"))


def _copy_room_file(room: Room, directory: Path) -> Path:
    directory.mkdir()
    (directory / "room.json").write_text(json.dumps(room.record))
    return directory


def test_idle_labs_are_culled_and_down_keeps_work_volumes_unless_asked(lab_image, engine, tmp_path):
    settings = RoomSettings(
        participants=("k1",), port=free_ports(1)[0], directory=tmp_path / "keep", image=lab_image, cull_idle_s=20
    )
    info = up(settings)
    room = Room(settings, json.loads((settings.directory / "room.json").read_text()))
    try:
        assert room.api("POST", "users/k1/server").status_code in (201, 202)
        wait_ready(room, ["k1"])
        # nobody uses it: the idle culler stops it (checks every 10 s)
        within(lambda: not room.api("GET", "users/k1").json().get("servers"), 600, "the culler", interval_s=2)
        assert room.api("GET", "users/k1").json().get("servers") == {}
    finally:
        removed = down(settings.directory)
    work = {"label": f"labkit.room.work={info.room_id}"}
    assert "hub (pid " in removed[0] and hub_process.hub_pid(settings.directory) is None
    assert (
        engine.containers.list(all=True, ignore_removed=True, filters={"label": f"{ROOM_LABEL}={info.room_id}"}) == []
    )
    assert engine.networks.list(filters={"label": f"{ROOM_LABEL}={info.room_id}"}) == []
    assert [v.name for v in engine.volumes.list(filters=work)] == [settings.volume("k1")]
    assert down(settings.directory, delete_work=True) == [f"volume {settings.volume('k1')}"]
    assert engine.volumes.list(filters=work) == []


def test_a_teacher_lab_is_labelled_and_delete_work_leaves_nothing(lab_image, engine, tmp_path):
    """`room up --teacher-lab`: the teacher's lab works on a volume carrying the room's work label, and
    `room down --delete-work` removes it with every other volume of the room (an unlabelled one that
    DockerSpawner made itself, for a user added on the hub's admin page, is found by its name)."""
    settings = RoomSettings(
        participants=("w1",),
        port=free_ports(1)[0],
        directory=tmp_path / "work",
        image=lab_image,
        teacher_lab=True,
        board=False,
    )
    info = up(settings)
    room = Room(settings, json.loads((settings.directory / "room.json").read_text()))
    try:
        assert room.api("POST", "users/teacher/server").status_code in (201, 202)
        wait_ready(room, ["teacher"])
        labels = engine.volumes.get(settings.volume("teacher")).attrs["Labels"]
        assert labels[WORK_LABEL] == info.room_id and labels[f"{ROOM_LABEL}.user"] == "teacher"
        engine.volumes.create(settings.volume("added"))  # no label, as DockerSpawner makes it
    finally:
        removed = down(settings.directory, delete_work=True)
    assert {f"volume {settings.volume(login)}" for login in ("teacher", "w1", "added")} <= set(removed)
    assert leftovers(engine, info.room_id) == []


def _hub_only(tmp_path: Path, site: str) -> tuple[RoomSettings, hub_process.Plumbing]:
    """A hub with no lab started (the spawner is never used): its process, its site config, its stop."""
    (tmp_path / "site.py").write_text(site)
    settings = RoomSettings(
        participants=("s1",),
        port=free_ports(1)[0],
        directory=tmp_path / "hub",
        config_file=tmp_path / "site.py",
        board=False,
    )
    settings.directory.mkdir()
    hub_port, proxy_api_port, board_port = free_ports(3)
    plumbing = hub_process.Plumbing(
        hub_ip="127.0.0.1",
        hub_port=hub_port,
        proxy_api_port=proxy_api_port,
        board_port=board_port,
        proxy_command=hub_process.proxy_command(),
        python=sys.executable,
    )
    return settings, plumbing


SECRETS = {
    "teacher_token": "t" * 64,
    "user_password": "shared-pass",
    "admin_password": "a" * 40,
    "proxy_token": "p" * 64,
}


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs: an ended process whose parent (init, for the hub's own session) has
    not reaped it yet is a zombie, not running."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_the_hub_outlives_up_loads_the_site_config_and_stops(tmp_path):
    settings, plumbing = _hub_only(tmp_path, "c.JupyterHub.template_vars = {'site': 'loaded'}\n")
    pid = hub_process.start_hub(settings, plumbing, SECRETS)
    try:
        assert hub_process.hub_pid(settings.directory) == pid and hub_process.hub_answers(settings.port)
        users = requests.get(
            f"http://127.0.0.1:{settings.port}/hub/api/users",
            timeout=30,
            headers={"Authorization": f"token {SECRETS['teacher_token']}"},
        ).json()
        assert {u["name"] for u in users} == {"s1", "teacher"}
        with pytest.raises(ServerStartError):
            hub_process.start_hub(settings, plumbing, SECRETS)  # one hub per room
        proxy = int((settings.directory / "jupyterhub-proxy.pid").read_text())
    finally:
        assert hub_process.stop_hub(settings.directory)[0] == f"hub (pid {pid})"
    assert hub_process.hub_pid(settings.directory) is None and not hub_process.hub_answers(settings.port)
    assert not _running(proxy) and not _running(pid)
    assert hub_process.stop_hub(settings.directory) == []  # nothing left to stop


def test_what_a_dead_hub_left_running_is_ended_by_its_records(tmp_path):
    """A hub killed with SIGKILL leaves its proxy (holding the room's port) and its idle culler running;
    `stop_hub` (what `room down` and `room up` call) ends both by the records they wrote as they started,
    and finds a live hub whose own record was lost as the parent of those processes."""
    settings, plumbing = _hub_only(tmp_path, "")
    pid = hub_process.start_hub(settings, plumbing, SECRETS)
    folder = processes.folder_of(settings.directory)

    def children() -> dict | None:
        found = {r.role: processes.running(r) for r in processes.read(folder) if r.role != "hub"}
        return found if set(found) == {"proxy", "idle-culler"} and all(found.values()) else None

    try:
        started = eventually(children, "the hub's proxy and culler to record themselves", 60)
        assert all(p.parent().pid == pid for p in started.values())
        (folder / "hub.json").write_text("not a record")  # lost: the hub is still found, by its children
        assert hub_process.hub_pid(settings.directory) == pid
        os.kill(pid, signal.SIGKILL)
        eventually(lambda: not _running(pid), "the hub to die", 30)
        assert hub_process.hub_pid(settings.directory) is None
        assert all(p.is_running() for p in started.values())  # orphans, the room's port still taken
        with pytest.raises(PortTakenError):
            hub_process.check_port(settings.ip, settings.port)
    finally:
        stopped = hub_process.stop_hub(settings.directory)
    assert sorted(s.split()[0] for s in stopped) == ["idle-culler", "proxy"]
    assert not any(p.is_running() for p in started.values()) and processes.read(folder) == []
    hub_process.check_port(settings.ip, settings.port)  # free again
    assert hub_process.stop_hub(settings.directory) == []


def test_a_hub_that_cannot_start_says_so(tmp_path):
    settings, plumbing = _hub_only(tmp_path, "raise RuntimeError('a broken site config')\n")
    with pytest.raises(ServerStartError) as exc:
        hub_process.start_hub(settings, plumbing, SECRETS, timeout_s=120)
    assert exc.value.exit_summary.startswith("exit code") and exc.value.log_tail
    assert hub_process.hub_pid(settings.directory) is None


def test_the_board_reads_saved_notebooks_through_the_hub_with_its_scopes_only(labs, grader_image):
    """The board's Jupyter source (the one the Kubernetes board uses): a token with just BOARD_SCOPES lists
    the ready labs' notebooks and reads their exercise cells through the hub and the proxy, and the grader
    judges what it read; a participant's token is refused, and a notebook that is not one is not judged."""
    reply = labs.api(
        "POST", "users/teacher/tokens", json={"expires_in": 600, "note": "board", "scopes": list(BOARD_SCOPES)}
    )
    assert reply.status_code == 201, reply.text
    mine = labs.token_of("p02")
    shipped = labs.contents("p02", mine, NOTEBOOK).json()["content"]
    for cell in shipped["cells"]:
        if "exercise:01-output2" in cell["metadata"].get("tags", []):
            cell["source"] = solution("01-output2")
    saved = labs.contents("p02", mine, NOTEBOOK, "PUT", json={"type": "notebook", "content": shipped})
    assert saved.status_code in (200, 201), saved.text
    source = JupyterSource(f"{labs.url}/hub/api", labs.url, reply.json()["token"], list(PARTICIPANTS))
    found = source.scan()
    assert set(found) == set(PARTICIPANTS) and NOTEBOOK in found["p02"] and NOTEBOOK in found["p03"]
    assert not any(n.endswith(".solution") for notebooks in found.values() for n in notebooks)
    theirs = source.read("p02", NOTEBOOK)
    assert theirs.cells["01-output2"] == solution("01-output2") and not theirs.untouched
    assert source.read("p03", NOTEBOOK).untouched  # as the lab copied it at first start
    with pytest.raises(SubmissionError) as broken:  # p01 overwrote it with text (the restart test)
        source.read("p01", NOTEBOOK)
    assert (broken.value.user, broken.value.notebook) == ("p01", NOTEBOOK)
    again = labs.contents("p02", mine, NOTEBOOK, "PUT", json={"type": "notebook", "content": shipped})
    assert again.status_code in (200, 201)
    assert source.scan()["p02"][NOTEBOOK].mtime >= found["p02"][NOTEBOOK].mtime
    source.close()

    refused = JupyterSource(f"{labs.url}/hub/api", labs.url, mine, list(PARTICIPANTS))
    with pytest.raises(SubmissionError) as exc:
        refused.scan()
    assert (exc.value.problem, exc.value.status_code) == ("refused", 403)
    refused.close()

    client = room_engine()
    try:
        run = Grader(client, labs.settings.room_id, grader_image).judge(theirs)
    finally:
        client.close()
    assert not run.error and run.network == ["lo"]
    assert {r.exercise: r.passed for r in run.results} == {"01-output2": True, "01-bad-request": False}

    # the room's own board (`room up`'s, reading the volumes) shows the same save passed
    board = f"{labs.url}/services/board/api/"
    teacher = {"Authorization": f"token {labs.record['teacher_token']}"}

    def judged() -> dict | None:
        row = requests.get(board + "progress", headers=teacher, timeout=30).json()["participants"]["p02"]
        return row if row["01-output2"] != "not started" else None

    row = eventually(judged, "the room's board to judge p02's save", 900, interval_s=1)
    assert (row["01-output2"], row["01-bad-request"]) == ("passed", "not started"), row


def test_room_image_builds_the_grader_on_the_lab_image(lab_image, engine, capsys):
    """`labkit room image --grader` (what a Kubernetes room pushes): the lab image, then the grader on it."""
    from labkit import cli
    from labkit.room.grader.image import RECIPE_LABEL
    from labkit.room.settings import GRADER_IMAGE

    assert cli.main(["room", "image", "--grader"]) == 0
    grader = engine.images.get(GRADER_IMAGE)
    assert grader.labels.get(RECIPE_LABEL) and GRADER_IMAGE in capsys.readouterr().out
    assert engine.images.get(lab_image).id in {layer["Id"] for layer in grader.history()}
