"""A real room (`room up`: the hub, three labs, the board and its graders) under faults, one room for every
case: a bad notebook, runaway exercises, a grader killed mid-run (once, then on every try), the board killed,
a lab killed, the hub killed. Each case asserts what the teacher sees afterwards and that no saved notebook
and no verdict was lost, and notes the seconds from the fault to the next correct verdict: the module prints
them at its end (``pytest tests/test_room_faults.py -s``) and writes them to test-artifacts/room-faults.json."""

from __future__ import annotations

import copy
import io
import json
import os
import re
import signal
import tarfile
import time

import docker.errors
import nbformat
import pytest
import requests
from browser_support import ARTIFACTS
from room_board_support import (
    NOTEBOOK,
    NOTEBOOKS_DIR,
    Room,
    container_of,
    leftovers,
    solution,
    wait_ready,
)
from waiting_support import eventually

from labkit.errors import LabkitError
from labkit.plumbing.ports import free_ports
from labkit.room.board import progress as progress_store
from labkit.room.hub import processes
from labkit.room.hub.lifecycle import down, status_rows, up
from labkit.room.protocol import INBOX, READY_FILE, ROLE_LABEL, ROOM_LABEL, SUBMISSION_FILE, Submission
from labkit.room.settings import RoomSettings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
PARTICIPANTS = RoomSettings.numbered(3)
VERDICT_S = 600  # a verdict's wait, at most (a retry's included)
# a runaway answer to 01-output2: its model never answers, so the check waits out its requests' timeouts
RUNAWAY = """%%triton_python compare
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(3600)
"""
SECONDS: dict[str, float] = {}  # fault -> seconds from it to the next correct verdict
SEEN: set[processes.ProcessRecord] = set()  # every process the room recorded, whatever became of it
TOKENS: dict[str, str] = {}


@pytest.fixture(scope="module")
def room(lab_image, grader_image, engine, tmp_path_factory):
    directory = tmp_path_factory.mktemp("faults") / "room"
    settings = RoomSettings(
        participants=PARTICIPANTS,
        port=free_ports(1)[0],
        directory=directory,
        memory="1G",
        cpu=1.0,
        shm_size="256M",
        image=lab_image,
        grader_image=grader_image,
    )
    info = up(settings)
    room = Room(settings, json.loads((directory / "room.json").read_text()))
    try:
        for login in PARTICIPANTS:
            assert room.api("POST", f"users/{login}/server").status_code in (201, 202)
        wait_ready(room, PARTICIPANTS)
        yield room
    finally:
        SEEN.update(processes.read(processes.folder_of(directory)))
        down(directory, delete_work=True)
        _report()
    assert leftovers(engine, info.room_id) == []
    assert [r for r in SEEN if processes.running(r) is not None] == []  # nothing of the room runs


def _report() -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "room-faults.json").write_text(json.dumps(SECONDS, indent=1) + "\n")
    print("\nseconds from the fault to the next correct verdict:")
    for fault, seconds in SECONDS.items():
        print(f"  {fault:<58} {seconds:6.1f}")


def _notebook(cells: dict[str, str] | None = None, copy_of: str = "") -> dict:
    """Notebook 01 as a lab saves it, with exercise ``cells`` replaced; ``copy_of``: that exercise's cell
    copied below itself (its tag too), the copy holding the solution."""
    nb = nbformat.read(os.path.join(NOTEBOOKS_DIR, NOTEBOOK), as_version=4)
    for at, cell in enumerate(list(nb.cells)):
        for tag in cell.metadata.get("tags", []):
            exercise = tag.removeprefix("exercise:")
            if exercise in (cells or {}):
                cell.source = cells[exercise]
            if exercise == copy_of:
                twin = copy.deepcopy(cell)
                twin.id, twin.source = "twin", solution(copy_of)
                nb.cells.insert(at + 1, twin)
    return json.loads(nbformat.writes(nb))


def _token(room: Room, login: str) -> str:
    if login not in TOKENS:
        TOKENS[login] = room.token_of(login)
    return TOKENS[login]


def _save(room: Room, login: str, content: dict | str) -> float:
    """Save notebook 01 in ``login``'s lab as JupyterLab does (the contents API); ``content`` a notebook, or
    text for a file that is no notebook. The time of the save."""
    body = (
        {"type": "notebook", "content": content}
        if isinstance(content, dict)
        else {"type": "file", "format": "text", "content": content}
    )
    at = time.time()
    reply = room.contents(login, _token(room, login), NOTEBOOK, "PUT", json=body)
    assert reply.status_code in (200, 201), reply.text
    return at


def _saved(room: Room, login: str) -> str:
    """``login``'s notebook 01 as their lab holds it (its text)."""
    reply = room.contents(login, _token(room, login), NOTEBOOK, params={"type": "file", "format": "text"})
    assert reply.status_code == 200, reply.text
    return reply.json()["content"]


def _answer(room: Room, login: str, exercise: str) -> str:
    """The source of ``login``'s cell tagged for ``exercise`` in their saved notebook 01."""
    cells = json.loads(_saved(room, login))["cells"]
    (source,) = [c["source"] for c in cells if f"exercise:{exercise}" in c["metadata"].get("tags", [])]
    return "".join(source)


def _table(room: Room) -> dict:
    """The teacher's table (api/progress): {login: {exercise: state}}."""
    reply = requests.get(
        f"{room.url}/services/board/api/progress",
        headers={"Authorization": f"token {room.record['teacher_token']}"},
        timeout=30,
    )
    return reply.json()["participants"] if reply.status_code == 200 else {}


def _page(room: Room, login: str = "") -> str:
    """The board's page as the teacher sees it (one participant's detail with ``login``)."""
    reply = requests.get(
        f"{room.url}/services/board/",
        params={"user": login} if login else {},
        headers={"Authorization": f"token {room.record['teacher_token']}"},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text[-500:]
    return reply.text


def _mark(room: Room, login: str, exercise: str) -> progress_store.Mark | None:
    """The mark as the board keeps it (progress.json): its state, problem, and when it was recorded (for an
    unreadable notebook: since when)."""
    try:
        return progress_store.load(room.settings.directory).mark(login, exercise)
    except LabkitError:  # being replaced: read again
        return None


def _verdict(room: Room, login: str, exercise: str, state: str, since: float, fault: str = "") -> progress_store.Mark:
    """Until the teacher's table shows ``state`` for ``login``'s ``exercise`` with a mark recorded after
    ``since``; every mark recorded meanwhile must be that state. With ``fault``, note the seconds from
    ``since`` to it."""
    seen: list[progress_store.Mark] = []

    def shown() -> progress_store.Mark | None:
        mark = _mark(room, login, exercise)
        if mark is not None and mark.checked >= since and mark not in seen:
            seen.append(mark)
        return mark if seen and _table(room).get(login, {}).get(exercise) == state == seen[-1].state else None

    mark = eventually(shown, f"{login}'s {exercise} to show {state!r}", VERDICT_S, interval_s=0.2)
    assert [m.state for m in seen] == [state] * len(seen), seen
    if fault:
        SECONDS[fault] = mark.checked - since
    return mark


def _board_log(room: Room, text: str) -> int:
    return (room.settings.directory / "hub.log").read_text(errors="replace").count(text)


def test_a_notebook_that_is_no_notebook_shows_unreadable_and_is_logged_once(room):
    at = _save(room, "p03", _notebook({"01-output2": solution("01-output2")}))
    _verdict(room, "p03", "01-output2", "passed", at, "a save, in a quiet room (no fault)")
    broken = _save(room, "p03", '{"cells": [ half a notebook')
    _verdict(room, "p03", "01-output2", "unreadable", broken, "a notebook that is not JSON: shown unreadable")
    detail = _page(room, "p03")
    assert re.search(
        r"\? unreadable since \d\d:\d\d</td><td>p03&#x27;s 01_python_backend.ipynb is not a notebook Jupyter can "
        r"read \(not valid JSON",
        detail,
    )
    assert "Its mark before: passed." in detail
    said = "p03's 01_python_backend.ipynb is not a notebook Jupyter can read (not valid JSON"
    for _ in range(3):  # three more scans, as the board makes every second: nothing more in the log
        reply = requests.post(
            f"{room.url}/services/board/api/refresh",
            headers={"Authorization": f"token {room.record['teacher_token']}"},
            timeout=60,
        )
        assert reply.status_code == 200
    assert _board_log(room, said) == 1
    fixed = _save(room, "p03", _notebook({"01-output2": solution("01-output2")}))
    assert _answer(room, "p03", "01-output2") == solution("01-output2")
    back = eventually(lambda: _table(room)["p03"]["01-output2"] == "passed", "p03's mark back", VERDICT_S)
    SECONDS["the notebook saved whole again: its mark back (no run)"] = time.time() - fixed
    assert back and _mark(room, "p03", "01-output2").checked < broken  # the verdict it had, not a new run


def test_an_exercise_tagged_on_two_cells_is_not_yet_saying_so(room):
    at = _save(room, "p02", _notebook(copy_of="01-output2"))
    _verdict(room, "p02", "01-output2", "not yet", at, "an exercise tagged on two cells: not yet, saying so")
    assert "the tag exercise:01-output2 is on two cells or more" in _page(room, "p02")
    assert _table(room)["p02"]["01-bad-request"] == "not started"


def test_runaway_exercises_do_not_hold_every_grader(room, engine):
    """Two participants' runaway answers (as many as the board has graders) and a third's good one: the good
    one is judged beside both runaways, which are judged "not yet" in the end."""
    before = _table(room)
    at = _save(room, "p01", _notebook({"01-output2": RUNAWAY}))
    _save(room, "p02", _notebook({"01-output2": RUNAWAY}))
    good = _save(
        room, "p03", _notebook({"01-output2": solution("01-output2"), "01-bad-request": solution("01-bad-request")})
    )
    eventually(
        lambda: {"p01", "p02", "p03"} <= set(_runs(engine, room)), "p03's run beside both runaways", 300, interval_s=0.2
    )
    _verdict(room, "p03", "01-bad-request", "passed", good, "a good save beside two runaway exercises")
    runaways = [_verdict(room, login, "01-output2", "not yet", at) for login in ("p01", "p02")]
    assert all(mark.problem for mark in runaways), runaways
    assert _table(room)["p03"]["01-output2"] == before["p03"]["01-output2"] == "passed"  # unchanged: not judged again


def _runs(engine, room: Room) -> dict[str, list]:
    """The grader containers judging now, by the participant whose submission each holds (its inbox)."""
    runs: dict[str, list] = {}
    labels = [f"{ROOM_LABEL}={room.settings.room_id}", f"{ROLE_LABEL}=grader"]
    for grader in engine.containers.list(ignore_removed=True, filters={"label": labels}):
        try:
            stream, _ = grader.get_archive(f"{INBOX}/{SUBMISSION_FILE}")
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                text = tar.extractfile(tar.next()).read().decode()
            grader.get_archive(f"{INBOX}/{READY_FILE}")  # whole
        except docker.errors.APIError:  # no submission yet (404), or the container is being removed
            continue
        runs.setdefault(Submission.decode(text).user, []).append(grader)
    return runs


def _kill_the_next_run(engine, room: Room, login: str, killed: set[str]) -> float:
    """Kill the grader container that judges ``login``'s save (one not killed before); the time of the kill."""

    def judging():
        return next((g for g in _runs(engine, room).get(login, []) if g.id not in killed), None)

    grader = eventually(judging, f"a grader run for {login} to start", 300, interval_s=0.1)
    killed.add(grader.id)
    at = time.time()
    try:
        grader.kill()
    except docker.errors.APIError:
        pass  # it ended meanwhile: the run still has no verdict of its own
    return at


def test_a_grader_killed_mid_run_is_judged_again_and_marked_apart_when_every_try_fails(room, engine):
    killed: set[str] = set()
    _save(room, "p01", _notebook({"01-output2": solution("01-output2")}))
    fault = _kill_the_next_run(engine, room, "p01", killed)
    _verdict(room, "p01", "01-output2", "passed", fault, "a grader killed mid-run: judged again")
    assert _board_log(room, "try 1 of 3") >= 1

    again = solution("01-output2") + "\n# the same, saved again with a comment\n"
    _save(room, "p01", _notebook({"01-output2": again}))
    for _ in range(3):
        fault = _kill_the_next_run(engine, room, "p01", killed)
    mark = _verdict(room, "p01", "01-output2", "could not judge", fault)
    assert "before it gave a verdict), 3 times;" in mark.problem, mark.problem
    page = _page(room)
    assert "<td class='could-not-judge' title='p01 · 01-output2: could not judge." in page
    assert "action='api/rejudge'" in page and "value='p01'" in page
    asked = time.time()
    reply = requests.post(
        f"{room.url}/services/board/api/rejudge",
        data={"user": "p01"},
        headers={"Authorization": f"token {room.record['teacher_token']}"},
        timeout=60,
    )
    assert reply.status_code == 200 and reply.json()["queued"] >= 1, reply.text
    _verdict(room, "p01", "01-output2", "passed", asked, "could not judge, then the teacher's 'judge again'")
    assert _answer(room, "p01", "01-output2") == again  # the notebook as saved


def test_a_killed_board_is_started_again_and_removes_its_graders(room, engine):
    folder = processes.folder_of(room.settings.directory)
    board = eventually(lambda: processes.find(folder, "board"), "the board's record", 30)
    SEEN.update(processes.read(folder))
    labels = [f"{ROOM_LABEL}={room.settings.room_id}", f"{ROLE_LABEL}=grader"]
    before = {c.id for c in engine.containers.list(ignore_removed=True, filters={"label": labels})}
    assert before  # its warm graders
    table = _table(room)
    at = time.time()
    board.kill()
    _save(room, "p02", _notebook({"01-output2": solution("01-output2")}))
    _verdict(room, "p02", "01-output2", "passed", at, "the board killed (the hub starts it again)")
    again = processes.find(folder, "board")
    assert again is not None and again.pid != board.pid
    assert not before & {c.id for c in engine.containers.list(all=True, ignore_removed=True, filters={"label": labels})}
    after = _table(room)
    assert {u: row for u, row in after.items() if u != "p02"} == {u: row for u, row in table.items() if u != "p02"}


def test_a_killed_lab_starts_again_with_the_participants_work(room, engine):
    saved = _saved(room, "p02")
    table = _table(room)
    lab = container_of(engine, room, "p02")
    at = time.time()
    lab.kill()
    eventually(lambda: lab.reload() or lab.status == "exited", "p02's lab to be dead", 60)

    def stopped() -> bool:
        return {r["login"]: r["state"] for r in status_rows(room.settings.directory)}["p02"] == "stopped"

    eventually(stopped, "the hub to see p02's lab stopped (it asks every 10 s)", 120, interval_s=0.5)
    SECONDS["a lab killed: `labkit room status` says stopped (no verdict)"] = time.time() - at
    # the participant reloads their page and starts their lab again
    assert room.api("POST", "users/p02/server").status_code in (201, 202)
    wait_ready(room, ["p02"], 300)
    assert _saved(room, "p02") == saved and _table(room) == table
    _save(room, "p02", _notebook({"01-output2": solution("01-output2"), "01-bad-request": solution("01-bad-request")}))
    _verdict(room, "p02", "01-bad-request", "passed", at, "a lab killed, started again by its participant")


def test_a_killed_hub_is_recovered_by_room_up_and_running_labs_keep_working(room, engine):
    folder = processes.folder_of(room.settings.directory)
    records = {r.role: r for r in processes.read(folder)}
    SEEN.update(records.values())
    assert set(records) == {"hub", "proxy", "board", "idle-culler"}
    token = _token(room, "p01")
    kernel = requests.post(f"{room.url}/user/p01/api/kernels", headers={"Authorization": f"token {token}"}, timeout=60)
    assert kernel.status_code == 201, kernel.text
    lab_id = container_of(engine, room, "p01").id
    table, saved = _table(room), _saved(room, "p01")
    at = time.time()
    os.kill(records["hub"].pid, signal.SIGKILL)
    eventually(lambda: processes.running(records["hub"]) is None, "the hub to die", 30)
    assert all(processes.running(records[r]) for r in ("proxy", "board", "idle-culler"))  # orphans

    info = up(room.settings)
    assert sorted(s.split()[0] for s in info.recovered) == ["board", "idle-culler", "proxy"]
    assert info.replaced_labs == ()
    assert not any(processes.running(records[r]) for r in ("proxy", "board", "idle-culler"))
    record = json.loads((room.settings.directory / "room.json").read_text())
    assert record["participant_password"] == room.record["participant_password"]
    assert (record["hub_ip"], record["hub_port"]) == (room.record["hub_ip"], room.record["hub_port"])
    SEEN.update(processes.read(folder))
    # the lab that ran all along answers through the new hub, with its kernel
    assert container_of(engine, room, "p01").id == lab_id
    kernels = requests.get(f"{room.url}/user/p01/api/kernels", headers={"Authorization": f"token {token}"}, timeout=60)
    assert kernels.status_code == 200 and kernel.json()["id"] in {k["id"] for k in kernels.json()}, kernels.text
    assert _saved(room, "p01") == saved
    assert {r["login"]: r["state"] for r in status_rows(room.settings.directory)} == dict.fromkeys(
        PARTICIPANTS, "running"
    )
    eventually(lambda: _table(room) == table, "the board's marks as they were", 120, interval_s=0.5)
    _save(room, "p01", _notebook({"01-output2": solution("01-output2"), "01-bad-request": solution("01-bad-request")}))
    _verdict(room, "p01", "01-bad-request", "passed", at, "the hub killed, then `labkit room up`")
    session = requests.Session()  # the password still opens the lab
    session.get(f"{room.url}/hub/login", timeout=30)
    form = {
        "username": "p03",
        "password": room.record["participant_password"],
        "_xsrf": session.cookies.get("_xsrf", ""),
    }
    assert session.post(f"{room.url}/hub/login", data=form, allow_redirects=False, timeout=30).status_code == 302


def test_down_leaves_nothing_running_whatever_the_hubs_record_says(room):
    folder = processes.folder_of(room.settings.directory)
    records = processes.read(folder)
    SEEN.update(records)
    (folder / "hub.json").write_text("not a record")  # lost: the hub is found as its children's parent
    removed = down(room.settings.directory)
    assert any(s.startswith("hub (pid") for s in removed), removed
    assert [r for r in records if processes.running(r) is not None] == []  # the hub stopped the rest
