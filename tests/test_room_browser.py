"""A real browser drives a real room: `labkit room up` with two participants and the teacher; the teacher logs
in through the hub's form in Chromium and lands on the board; participant 1 logs in through the same form,
opens notebook 01 from JupyterLab's file browser, answers an exercise, runs it in their own kernel, sees the
check pass and saves; the teacher's board, open all along, shows that exercise passed without being
reloaded, and none of the board's own requests failed (its console holds no error); participant 2 cannot
open participant 1's lab. Then `room down --delete-work` leaves nothing of the room on the engine."""

from __future__ import annotations

import json
import re

import pytest
import requests
from browser_support import ARTIFACTS, launch, require_chromium
from room_board_support import leftovers

from labkit.course.exercises import REGISTRY
from labkit.errors import WaitTimeoutError
from labkit.plumbing.polling import wait_until
from labkit.plumbing.ports import free_ports
from labkit.room.hub import process as hub_process
from labkit.room.hub.lifecycle import down, up
from labkit.room.settings import RoomSettings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.browser,
]  # browser: alone, after the parallel part
NOTEBOOK = "01_python_backend.ipynb"
EXERCISE = "01-output2"
# the cells the exercise needs, by a line of each: the lab's start, the magics, compare's config, the answer, its check
NEEDED = (
    "lab = labkit.start()",
    "%load_ext labkit",
    "%%triton_config compare",
    "%%triton_python compare",
    f'labkit.exercises.check("{EXERCISE}"',
)


@pytest.fixture(scope="module")
def room(lab_image, grader_image, engine, tmp_path_factory):
    require_chromium()
    directory = tmp_path_factory.mktemp("browser-room") / "room"
    settings = RoomSettings(
        participants=RoomSettings.numbered(2),
        port=free_ports(1)[0],
        directory=directory,
        memory="2G",
        cpu=1.0,
        shm_size="256M",
        image=lab_image,
        grader_image=grader_image,
    )
    info = up(settings)
    try:
        yield settings, json.loads((directory / "room.json").read_text())
    finally:
        down(directory, delete_work=True)
        assert hub_process.hub_pid(directory) is None
        assert leftovers(engine, info.room_id) == []


def _login(page, url: str, login: str, password: str, next_url: str = "") -> None:
    page.goto(f"{url}/hub/login" + (f"?next={next_url}" if next_url else ""))
    page.fill("#username_input", login)
    page.fill("#password_input", password)
    page.click("#login_submit")


def _cell(page, line: str):
    """The notebook's code cell whose source holds ``line``."""
    return (
        page.locator(".jp-Notebook .jp-CodeCell").filter(has=page.locator(".jp-InputArea-editor", has_text=line)).first
    )


def test_a_participant_solves_an_exercise_in_chromium_and_the_teacher_sees_it_passed(room, engine):
    from playwright.sync_api import sync_playwright

    settings, record = room
    url = record["url"].rstrip("/")
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            # the teacher: the hub's form, and they land on the board, with no lab of their own
            teacher = browser.new_context(viewport={"width": 1600, "height": 900}).new_page()
            problems: list[str] = []  # the console's errors and the failed requests of the room's own pages
            teacher.on(
                "console",
                lambda msg: (
                    problems.append(f"console: {msg.text} at {msg.location.get('url')}")
                    if msg.type == "error"
                    else None
                ),
            )
            teacher.on("requestfailed", lambda r: problems.append(f"request: {r.url} {r.failure}"))
            _login(teacher, url, record["teacher"], record["teacher_password"])
            teacher.wait_for_url(re.compile(re.escape(f"{url}/services/board/") + r"(\?.*)?$"))
            refused = requests.post(
                f"{url}/hub/api/users/{record['teacher']}/server",
                timeout=60,
                headers={"Authorization": f"token {record['teacher_token']}"},
            )
            assert refused.status_code == 403 and "--teacher-lab" in refused.text, refused.text
            mark = teacher.locator("#grid tbody tr", has=teacher.locator("a:text-is('p01')")).locator(
                f"td[title^='p01 · {EXERCISE}:']"
            )
            assert mark.get_attribute("class") == "not-started"
            loads: list[str] = []  # the board's page loaded again (a full reload): none may happen
            teacher.on("load", lambda page: loads.append(page.url))
            teacher.evaluate("window.labkitOpened = true")

            # participant 1: the hub's form, then their own lab (JupyterHub starts it)
            p01 = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            p01.set_default_timeout(60_000)
            _login(p01, url, "p01", record["participant_password"])
            p01.wait_for_url(re.compile(r".*/user/p01/lab.*"), timeout=600_000)
            item = p01.locator(".jp-DirListing-item", has_text=NOTEBOOK)
            item.wait_for(timeout=120_000)
            p01.screenshot(path=str(ARTIFACTS / "room-browser-p01-lab.png"))
            # no "official Jupyter news" prompt: the image's JupyterLab settings say no
            news = p01.request.get(f"{url}/user/p01/lab/api/settings/@jupyterlab/apputils-extension:notification")
            assert news.ok and news.json()["schema"]["properties"]["fetchNews"]["default"] == "false", news.text()
            item.dblclick()
            answer = _cell(p01, NEEDED[3])
            answer.wait_for()
            answer.locator(".cm-content").click()
            p01.keyboard.press("Control+A")
            p01.keyboard.press("Delete")
            p01.keyboard.insert_text(REGISTRY[EXERCISE].solution().rstrip("\n"))
            for first_line in NEEDED:  # run just what the exercise needs, in order, in p01's own kernel
                cell = _cell(p01, first_line)
                cell.locator(".jp-InputPrompt").click()
                p01.keyboard.press("Control+Enter")
            check = _cell(p01, NEEDED[4]).locator(".jp-OutputArea-output")
            check.filter(has_text="passed").wait_for(timeout=300_000)
            assert f"passed: {EXERCISE}" in check.inner_text()
            p01.keyboard.press("Control+s")

            def saved() -> bool:
                reply = p01.request.get(f"{url}/user/p01/api/contents/{NOTEBOOK}")
                return reply.ok and any(
                    REGISTRY[EXERCISE].solution().strip() == "".join(c["source"]).strip()
                    for c in reply.json()["content"]["cells"]
                )

            try:
                wait_until(saved, 60, f"{NOTEBOOK} saved with the answer", interval_s=0.5)
            except WaitTimeoutError:
                p01.screenshot(path=str(ARTIFACTS / "room-browser-p01-not-saved.png"))
                raise
            p01.screenshot(path=str(ARTIFACTS / "room-browser-p01-passed.png"))
            container = engine.containers.get(f"{settings.prefix}-p01")
            code, out = container.exec_run(["bash", "-lc", "python -c 'print(6 * 7)'"], user="jovyan")
            assert (code, out.decode().strip()) == (0, "42")  # `python` works in a lab's terminal

            # the board, open since before the save, shows the mark by itself: no reload, no click
            passed = teacher.locator(f"#grid tbody tr:has(a:text-is('p01')) td.passed[title^='p01 · {EXERCISE}:']")

            def shown() -> bool:
                assert problems == [], problems  # a request of the board's page failed: it never updates
                return passed.count() == 1

            try:
                wait_until(shown, 600, f"{EXERCISE} passed for p01 on the open board", interval_s=0.5)
            except WaitTimeoutError:
                teacher.screenshot(path=str(ARTIFACTS / "room-browser-board-timeout.png"))
                raise
            teacher.screenshot(path=str(ARTIFACTS / "room-browser-board.png"))
            assert mark.inner_text() == "\u2713"
            assert teacher.evaluate("window.labkitOpened === true") and loads == []  # the same page, updated
            assert problems == [], problems

            # participant 2: logged in, but p01's lab is not theirs
            p02 = browser.new_context().new_page()
            _login(p02, url, "p02", record["participant_password"], next_url="/hub/home")
            p02.wait_for_url(f"{url}/hub/home")
            theirs = p02.goto(f"{url}/user/p01/lab")
            assert theirs.status == 403
            p02.screenshot(path=str(ARTIFACTS / "room-browser-p02-refused.png"))
        finally:
            browser.close()
