"""The board fits a room: 50 participants × every exercise on one 1600×900 screen, in Chromium, served by
the real board service behind a real JupyterHub; the grade records are stored the way the board stores a
grader run's verdicts (Progress.record, then progress.save: Board._record's own two calls)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from browser_support import ARTIFACTS, launch, require_chromium
from room_board_support import board_hub, room_engine

from labkit.course.exercises import REGISTRY
from labkit.room.board import progress as progress_store
from labkit.room.protocol import RoomVerdict

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.browser,
]  # browser: alone, after the parallel part
PARTICIPANTS = [f"p{i:02d}" for i in range(1, 51)]
TOKENS = {"teacher": "teacher-token-" + os.urandom(8).hex()}
SCREEN = {"width": 1600, "height": 900}


def _verdicts(index: int) -> dict[str, dict]:
    """Participant number ``index``'s results, by notebook, as the grader returns them: participant k solved
    the first k % 18 exercises, is stuck on the next one and has not started the rest."""
    ids = progress_store.exercise_ids()
    solved = index % (len(ids) + 1)
    by_notebook: dict[str, list[RoomVerdict]] = {}
    for position, exercise in enumerate(ids):
        result = RoomVerdict(
            exercise,
            passed=position < solved,
            started=position <= solved,
            problem="" if position < solved else f"{exercise} answered the wrong outputs",
            hint=REGISTRY[exercise].hint,
        )
        by_notebook.setdefault(REGISTRY[exercise].notebook + ".ipynb", []).append(result)
    return by_notebook


def _store_grades(room_dir: Path) -> dict[str, int]:
    """Write 50 participants' verdicts into the room's progress.json; {login: exercises passed}."""
    room_dir.mkdir(parents=True, exist_ok=True)
    table = progress_store.load(room_dir, PARTICIPANTS)
    for index, user in enumerate(PARTICIPANTS, start=1):
        for notebook, results in _verdicts(index).items():
            table.record(user, notebook, time.time(), results)
            progress_store.save(room_dir, table)
    return {u: sum(m.state == progress_store.PASSED for m in table.marks[u].values()) for u in PARTICIPANTS}


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    require_chromium()
    room_engine().close()  # the board lists the room's volumes: an engine must answer
    folder = tmp_path_factory.mktemp("board50")
    solved = _store_grades(folder / "room")  # before the board starts: it loads them at its start
    # the grader image is only named: no notebook is saved, so no grader runs
    with board_hub(folder, f"t{uuid.uuid4().hex[:8]}", PARTICIPANTS, TOKENS, poll_s=600) as (url, _):
        yield url, solved


def _inside(box: dict | None) -> bool:
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= SCREEN["width"]
        and box["y"] + box["height"] <= SCREEN["height"]
    )


def test_fifty_participants_and_every_exercise_fit_one_screen(board):
    from playwright.sync_api import sync_playwright

    url, solved = board
    ids = progress_store.exercise_ids()
    with sync_playwright() as pw:
        browser = launch(pw)
        context = browser.new_context(
            viewport=SCREEN, extra_http_headers={"Authorization": f"token {TOKENS['teacher']}"}
        )
        page = context.new_page()
        try:
            assert page.goto(f"{url}/services/board/").status == 200
            page.screenshot(path=str(ARTIFACTS / "room-board-50x17.png"))
            rows = page.locator("#grid tbody tr")
            assert rows.count() == len(PARTICIPANTS)
            assert [rows.nth(i).locator("th").inner_text() for i in range(rows.count())] == PARTICIPANTS
            headers = page.locator("#grid thead th")
            assert headers.count() == len(ids) + 2  # participant, the exercises, solved
            outside = [
                f"row {rows.nth(i).locator('th').inner_text()}"
                for i in range(rows.count())
                if not _inside(rows.nth(i).bounding_box())
            ]
            outside += [
                f"column {headers.nth(i).inner_text()}"
                for i in range(headers.count())
                if not _inside(headers.nth(i).bounding_box())
            ]
            outside += ["the summary row"] * (not _inside(page.locator("#grid tfoot tr").bounding_box()))
            assert not outside, f"outside the 1600×900 screen: {outside}"

            # a mark and a colour per cell; the problem and the hint on hover
            cells = rows.nth(2).locator("td")  # p03: solved the first 3, stuck on the fourth
            assert [cells.nth(i).inner_text() for i in range(5)] == ["\u2713", "\u2713", "\u2713", "\u2717", "\u00b7"]
            assert cells.nth(0).get_attribute("class") == "passed" and cells.nth(3).get_attribute("class") == "not-yet"
            stuck = cells.nth(3).get_attribute("title")
            assert stuck.startswith(f"p03 · {ids[3]}: not yet.") and "wrong outputs" in stuck and "Hint: " in stuck
            assert cells.nth(len(ids)).inner_text() == "3"  # the solved column
            # how many passed each exercise: participant k passed the first k % 18
            summary = page.locator("#grid tfoot td")
            expected = [sum(1 for k in range(1, 51) if k % (len(ids) + 1) > position) for position in range(len(ids))]
            assert [int(summary.nth(i).inner_text()) for i in range(len(ids))] == expected

            page.click("#grid thead >> text=solved")  # sorted by the number solved, most first
            page.wait_for_url("**sort=solved")
            order = [rows.nth(i).locator("th").inner_text() for i in range(rows.count())]
            assert order == sorted(PARTICIPANTS, key=lambda u: (-solved[u], u))
            assert all(_inside(rows.nth(i).bounding_box()) for i in range(rows.count()))
            page.screenshot(path=str(ARTIFACTS / "room-board-50x17-by-solved.png"))
            page.click("#grid thead >> text=participant")
            page.wait_for_url("**sort=name")
            assert rows.nth(0).locator("th").inner_text() == "p01"

            page.click("#grid tbody a:text-is('p03')")  # one participant's detail: every exercise's problem and hint
            page.wait_for_url("**user=p03")
            detail = page.locator("table.detail tr")
            assert detail.count() == len(ids) + 1
            assert "wrong outputs" in detail.nth(4).inner_text() and "Hint: " in detail.nth(4).inner_text()
            page.screenshot(path=str(ARTIFACTS / "room-board-detail.png"))
        finally:
            browser.close()
