"""The teacher's board behind a real JupyterHub 6.1: only the teacher's role opens it; a participant saves
a solved exercise and the board shows it passed. The board runs as an external service with the very
environment the Kubernetes values give it (`room up`'s managed board: tests/test_room_hub.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from labkit import BoardError, SetupError, cli
from labkit.room.hub import free_port, proxy_command
from labkit.room.k8s_board import service_environment
from labkit.room.progress import board_table
from labkit.room.settings import BOARD_SCOPES
from room_board_support import RoomVolumes, notebook, room_engine, skip_or_fail, solution

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
TOKENS = {"teacher": "teacher-token-" + os.urandom(8).hex(), "p02": "p02-token-" + os.urandom(8).hex()}
BOARD_TOKEN = "board-token-" + os.urandom(8).hex()
CONFIG = """
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.command = {proxy!r}
c.JupyterHub.db_url = "sqlite:///{dir}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{dir}/cookie_secret"
c.JupyterHub.pid_file = "{dir}/hub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"teacher", "p01", "p02"}}
c.JupyterHub.api_tokens = {tokens!r}
c.JupyterHub.load_roles = [{{"name": "teacher", "users": ["teacher"],
                            "scopes": ["self", "access:services!service=board"]}},
                           {{"name": "board", "services": ["board"], "scopes": {scopes!r}}}]
c.JupyterHub.services = [{{"name": "board", "url": "http://127.0.0.1:{board_port}", "oauth_no_confirm": True,
                          "api_token": {board_token!r}}}]
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory, grader_image):
    """A hub on 127.0.0.1 with the board of a two-participant room; stopped (board, proxy, containers) after."""
    try:
        proxy = proxy_command()
    except SetupError as exc:
        skip_or_fail(f"no configurable-http-proxy: {exc}")
    client = room_engine()
    room = RoomVolumes(client, grader_image)
    folder = tmp_path_factory.mktemp("hub")
    room_dir = folder / "room"
    room_dir.mkdir()
    port, hub_port, proxy_api, board_port = (free_port() for _ in range(4))
    command = [sys.executable, "-m", "labkit.room.board", "--room-dir", str(room_dir), "--room-id", room.id,
               "--participants", "p01,p02", "--grader-image", room.image, "--poll-s", "2"]
    environment = {k: os.environ[k] for k in ("PATH", "HOME", "DOCKER_HOST") if k in os.environ}
    environment["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    environment.update(service_environment(f"http://127.0.0.1:{hub_port}/hub/api", f"http://127.0.0.1:{board_port}"),
                       JUPYTERHUB_API_TOKEN=BOARD_TOKEN)
    (folder / "jupyterhub_config.py").write_text(CONFIG.format(
        port=port, hub_port=hub_port, proxy=list(proxy), proxy_api=proxy_api, board_port=board_port, dir=folder,
        tokens={v: k for k, v in TOKENS.items()}, scopes=list(BOARD_SCOPES), board_token=BOARD_TOKEN))
    log = open(folder / "hub.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(folder / "jupyterhub_config.py")],
                               cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    board = subprocess.Popen(command, env=environment, cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and board.poll() is None:
            try:
                if requests.get(f"{url}/services/board/api/progress", timeout=5,
                                headers={"Authorization": f"token {TOKENS['teacher']}"}).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"the hub and its board did not come up:\n{(folder / 'hub.log').read_text()[-3000:]}")
        yield url, room, room_dir
    finally:
        for started in (board, process):
            started.send_signal(signal.SIGTERM)
            try:
                started.wait(60)
            except subprocess.TimeoutExpired:
                started.kill()
                started.wait()
        log.close()
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
    assert requests.post(f"{url}/services/board/api/refresh", timeout=30,
                         headers={"Authorization": f"token {TOKENS['p02']}"}).status_code == 403
    with pytest.raises(BoardError) as refused:
        board_table(url, TOKENS["p02"])
    assert refused.value.status_code == 403


def test_a_saved_solution_shows_passed_on_the_board(hub, tmp_path):
    url, room, room_dir = hub
    start = _get(url, "api/progress", "teacher").json()
    assert set(start["participants"]) == {"p01", "p02"}
    assert set(start["participants"]["p01"].values()) == {"not started"}
    room.save("p01", notebook({"01-output2": solution("01-output2")}))
    refresh = requests.post(f"{url}/services/board/api/refresh", timeout=120,
                            headers={"Authorization": f"token {TOKENS['teacher']}"})
    assert refresh.status_code == 200
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        table = _get(url, "api/progress", "teacher").json()["participants"]
        if table["p01"]["01-output2"] != "not started":
            break
        time.sleep(2)
    assert table["p01"]["01-output2"] == "passed", table["p01"]
    assert table["p01"]["01-bad-request"] == "not started" and set(table["p02"].values()) == {"not started"}
    page = _get(url, "", "teacher")
    assert page.status_code == 200 and "<td class='passed'>" in page.text and "Hint:" in page.text
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
