"""The teacher's board behind a real JupyterHub 6.1: only the teacher's role opens it; a participant saves
a solved exercise and the board shows it passed. The board runs as an external service with the very
environment the Kubernetes values give it (`room up`'s managed board: tests/test_room_hub.py)."""

from __future__ import annotations

import json
import os

import pytest
import requests
from room_board_support import RoomVolumes, board_hub, notebook, room_engine, solution
from waiting_support import eventually

from labkit import cli
from labkit.errors import BoardError
from labkit.room.board.progress import board_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
TOKENS = {"teacher": "teacher-token-" + os.urandom(8).hex(), "p02": "p02-token-" + os.urandom(8).hex()}


@pytest.fixture(scope="module")
def hub(tmp_path_factory, grader_image):
    """A hub on 127.0.0.1 with the board of a two-participant room; stopped (board, proxy, containers) after."""
    client = room_engine()
    room = RoomVolumes(client, grader_image)
    folder = tmp_path_factory.mktemp("hub")
    try:
        with board_hub(folder, room.id, ["p01", "p02"], TOKENS, grader_image=room.image) as (url, room_dir):
            yield url, room, room_dir
    finally:
        room.close()
        client.close()


def _get(url: str, path: str, user: str | None = None, **options):
    headers = {"Authorization": f"token {TOKENS[user]}"} if user else {}
    return requests.get(f"{url}/services/board/{path}", headers=headers, timeout=30, **options)


def test_a_participants_token_cannot_read_the_board(hub):
    url, _, _ = hub
    for path in ("api/progress", ""):
        assert _get(url, path, "p02").status_code == 403
        anonymous = _get(url, path, allow_redirects=False)
        assert anonymous.status_code in (302, 401, 403)
        if anonymous.status_code == 302:  # to the hub's login, never the board's content
            assert "/hub/" in anonymous.headers["Location"] and "passed" not in anonymous.text
    assert (
        requests.post(
            f"{url}/services/board/api/refresh", timeout=30, headers={"Authorization": f"token {TOKENS['p02']}"}
        ).status_code
        == 403
    )
    with pytest.raises(BoardError) as refused:
        board_table(url, TOKENS["p02"])
    assert refused.value.status_code == 403


def test_a_saved_solution_shows_passed_on_the_board(hub, tmp_path):
    url, room, room_dir = hub
    start = _get(url, "api/progress", "teacher").json()
    assert set(start["participants"]) == {"p01", "p02"}
    assert set(start["participants"]["p01"].values()) == {"not started"}
    room.save("p01", notebook({"01-output2": solution("01-output2")}))
    refresh = requests.post(
        f"{url}/services/board/api/refresh", timeout=120, headers={"Authorization": f"token {TOKENS['teacher']}"}
    )
    assert refresh.status_code == 200

    def judged() -> dict | None:
        table = _get(url, "api/progress", "teacher").json()["participants"]
        return table if table["p01"]["01-output2"] != "not started" else None

    table = eventually(judged, "the board's verdict on p01's save", 900, interval_s=1)
    assert table["p01"]["01-output2"] == "passed", table["p01"]
    assert table["p01"]["01-bad-request"] == "not started" and set(table["p02"].values()) == {"not started"}
    page = _get(url, "", "teacher")
    assert (
        page.status_code == 200
        and "<td class='passed' title='p01 · 01-output2: passed.'>" in page.text
        and "Hint:" in page.text
    )
    saved = json.loads((room_dir / "progress.json").read_text())
    assert saved["judged"]["p01"] and "p02" not in saved["judged"]
    out = tmp_path / "grades.csv"
    assert cli.main(["room", "grades", "--dir", str(room_dir), "--csv", str(out)]) == 0
    header, *rows = [line.split(",") for line in out.read_text().splitlines()]
    p01 = dict(zip(header, rows[0]))
    assert p01["participant"] == "p01" and p01["01-output2"] == "passed" and p01["01-bad-request"] == "not started"
    asked = tmp_path / "asked.csv"  # the same table from the board itself, as for a room on Kubernetes
    assert cli.main(["room", "grades", "--url", url, "--token", TOKENS["teacher"], "--csv", str(asked)]) == 0
    assert asked.read_text() == out.read_text()
