"""The teacher's board: a JupyterHub service at ``/services/board/`` showing participants × exercises.

    python -m labkit.room.board --room-dir room [--room-id ID] [--participants p01,p02] [--poll-s 20]

The hub starts it as a managed service (it passes JUPYTERHUB_API_TOKEN, JUPYTERHUB_SERVICE_URL,
JUPYTERHUB_SERVICE_PREFIX, ...). JupyterHub's own OAuth (``HubOAuthenticated``) guards every page: only
holders of ``access:services!service=board`` (the room's teacher role) get in; anyone else gets 403, or
the hub's login page first. Every ``poll_s`` seconds (and on ``POST api/refresh``) the board lists the
saved notebooks (``labkit.room.sources``: the room's Docker volumes, or each lab's Jupyter API through
the hub) and queues each new save for a grader run (``labkit.room.grader``: a container with no network;
``labkit.room.pods`` on Kubernetes); ``graders`` run at a time. Marks go to ``<room dir>/progress.json``.

    GET  /services/board/               the grid (refreshes itself)
    GET  /services/board/api/progress   {"participants": {"p01": {"01-bad-request": "passed", ...}, ...}}
    POST /services/board/api/refresh    look for saved notebooks now
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import logging
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from ..errors import LabkitError
from ..exercises import REGISTRY
from . import progress as progress_store
from .grader import Grader, Limits, Runner, participant_volume, untouched_results
from .settings import GRADER_IMAGE
from .sources import JupyterSource, NotebookSource, VolumeSource

log = logging.getLogger("labkit.room.board")
REFRESH_PAGE_S = 10


class Board:
    """The watch loop: scan the ``source``, queue new saves, judge them ``graders`` at a time with the
    ``runner``, keep the marks."""

    def __init__(self, room_dir: Path, room_id: str, participants: list[str], source: NotebookSource,
                 runner: Runner, poll_s: float = 20.0, graders: int = 2) -> None:
        self.room_dir = Path(room_dir)
        self.room_id = room_id
        self.source = source
        self.runner = runner
        self.poll_s = poll_s
        self.graders = max(1, graders)
        self.progress = progress_store.load(self.room_dir, participants)
        self.pending: set[tuple[str, str]] = set()
        self.queue: asyncio.Queue[tuple[str, str, float]] = asyncio.Queue()
        self.pool = ThreadPoolExecutor(self.graders + 1, thread_name_prefix="board")
        self._scanning = asyncio.Lock()  # one scan at a time: the page's button and the watch loop share it
        self.last_scan_error = ""
        self.prepare_error = ""
        self.prepared = asyncio.Event()  # no grader run before the runner is ready (its image built)

    async def poll_once(self) -> int:
        """Scan the source once; queue each notebook saved since it was last judged. Returns how many."""
        loop = asyncio.get_running_loop()
        async with self._scanning:
            try:
                found = await loop.run_in_executor(self.pool, self.source.scan)
                self.last_scan_error = ""
            except LabkitError as exc:
                self.last_scan_error = str(exc)
                log.warning("%s", exc)
                return 0
        queued = 0
        for user, notebooks in sorted(found.items()):
            for notebook, saved in sorted(notebooks.items()):
                if (user, notebook) in self.pending or not self.progress.needs_check(user, notebook, saved.mtime):
                    continue
                if saved.untouched:  # the copy made at the lab's first start: nothing to run
                    self._record(user, notebook, saved.mtime, untouched_results(notebook))
                    continue
                self.pending.add((user, notebook))
                self.queue.put_nowait((user, notebook, saved.mtime))
                queued += 1
        return queued

    async def watch(self) -> None:
        """Prepare the runner (build the grader image when missing or outdated: minutes on a vfs engine;
        tried again, less and less often, while it fails), then poll every ``poll_s`` seconds."""
        wait_s = self.poll_s
        while True:
            try:
                await asyncio.get_running_loop().run_in_executor(self.pool, self.runner.prepare)
                self.prepare_error = ""
                break
            except LabkitError as exc:
                self.prepare_error = str(exc)
                log.warning("%s (trying again in %.0f s)", exc, wait_s)
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, 600.0)
        self.prepared.set()
        while True:
            await self.poll_once()
            await asyncio.sleep(self.poll_s)

    async def judge_forever(self) -> None:
        loop = asyncio.get_running_loop()
        await self.prepared.wait()
        while True:
            user, notebook, mtime = await self.queue.get()
            try:
                submission = await loop.run_in_executor(self.pool, self.source.read, user, notebook)
                if submission.untouched:
                    self._record(user, notebook, mtime, untouched_results(notebook))
                    continue
                judgement = await loop.run_in_executor(self.pool, self.runner.judge, submission)
                log.info("%s %s judged in %.1f s%s", user, notebook, judgement.seconds,
                         f" ({judgement.error})" if judgement.error else "")
                self._record(user, notebook, mtime, judgement.results)
            except LabkitError as exc:  # unreadable now: queued again at the next scan
                log.warning("%s %s: %s", user, notebook, exc)
            finally:
                self.pending.discard((user, notebook))

    def _record(self, user: str, notebook: str, mtime: float, results: list[dict[str, Any]]) -> None:
        self.progress.record(user, notebook, mtime, results)
        try:
            progress_store.save(self.room_dir, self.progress)
        except (LabkitError, OSError) as exc:  # the marks stay in memory (the page, the API); say why not on disk
            log.warning("%s", exc)

    def start(self) -> list[asyncio.Task[None]]:
        return [asyncio.ensure_future(self.watch())] + [asyncio.ensure_future(self.judge_forever())
                                                        for _ in range(self.graders)]

    def sweep(self) -> None:
        """Stop the source's scanner and remove the room's grader runs still there (the board is stopping)."""
        self.source.close()
        self.runner.close()


def render_page(board: Board, xsrf_form: str = "") -> str:
    """The grid: one row per participant, one column per exercise; each cell its state and, until passed, its hint."""
    ids = progress_store.exercise_ids()
    head = "".join(f"<th title='{html.escape(REGISTRY[e].title)}'>{html.escape(e)}</th>" for e in ids)
    rows = []
    for user in board.progress.participants:
        cells = []
        for e in ids:
            mark = board.progress.mark(user, e)
            note = " ".join(x for x in (mark.problem, f"Hint: {mark.hint}" if mark.hint else "") if x)
            cells.append(f"<td class='{mark.state.replace(' ', '-')}'><b>{mark.state}</b>"
                         f"<small>{html.escape(note)}</small></td>")
        rows.append(f"<tr><th>{html.escape(user)}</th>{''.join(cells)}</tr>")
    queued = len(board.pending)
    status = f"{queued} notebook(s) waiting for the grader" if queued else "every saved notebook is judged"
    if not board.prepared.is_set():
        status = f"preparing the grader {board.runner.image} (building its image takes minutes, once)"
        if board.prepare_error:
            status = f"the grader {board.runner.image} is not ready; trying again"
    error = "".join(f"<p class='error'>{html.escape(e)}</p>" for e in (board.prepare_error, board.last_scan_error) if e)
    return f"""<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_PAGE_S}"><title>labkit room {html.escape(board.room_id)}</title>
<style>body{{font-family:sans-serif}} td,th{{border:1px solid #ccc;padding:4px;vertical-align:top}}
td small{{display:block;max-width:16em;color:#555}} .passed{{background:#d4f7d4}} .not-yet{{background:#fde2c8}}
.not-started{{background:#eee}} table{{border-collapse:collapse}} .error{{color:#a00}}</style></head><body>
<h1>Room {html.escape(board.room_id)}</h1><p>{status}; this page refreshes every {REFRESH_PAGE_S} s.</p>{error}
<form method="post" action="api/refresh">{xsrf_form}<button>look for saved notebooks now</button></form>
<table><tr><th>participant</th>{head}</tr>{''.join(rows)}</table></body></html>"""


class _Handler(HubOAuthenticated, web.RequestHandler):
    @property
    def board(self) -> Board:
        return self.settings["board"]


class PageHandler(_Handler):
    @web.authenticated
    def get(self) -> None:
        self.write(render_page(self.board, self.xsrf_form_html()))


class ProgressHandler(_Handler):
    @web.authenticated
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(self.board.progress.table()))


class RefreshHandler(_Handler):
    @web.authenticated
    async def post(self) -> None:
        queued = await self.board.poll_once()
        if "application/json" in self.request.headers.get("Accept", "") or "Authorization" in self.request.headers:
            self.write({"queued": queued})
        else:
            self.redirect(self.settings["prefix"])


def make_app(board: Board, prefix: str) -> web.Application:
    return web.Application([
        (prefix, PageHandler), (prefix + "api/progress", ProgressHandler), (prefix + "api/refresh", RefreshHandler),
        (prefix + "oauth_callback", HubOAuthCallbackHandler),
    ], board=board, prefix=prefix, cookie_secret=os.urandom(32), xsrf_cookies=False)


def _room_record(room_dir: Path) -> dict[str, Any]:
    """What ``labkit room up`` wrote into ``room.json``, if anything (keys used: id, participants, grader_image)."""
    try:
        return json.loads((room_dir / "room.json").read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise LabkitError(f"Cannot read {room_dir / 'room.json'} ({exc}); pass --room-id and --participants.") from None


def parser() -> argparse.ArgumentParser:
    """The board's command line (`room up` and the Kubernetes values write one)."""
    parser = argparse.ArgumentParser(prog="python -m labkit.room.board", description=__doc__.split("\n\n")[0])
    parser.add_argument("--room-dir", type=Path, required=True)
    parser.add_argument("--room-id", help="default: room.json's id")
    parser.add_argument("--participants", help="comma-separated logins; default: room.json's participants")
    parser.add_argument("--notebooks", choices=("volumes", "jupyter"), default="volumes",
                        help="read saved notebooks from the room's Docker volumes, or from each lab's Jupyter API "
                        "through the hub (the token needs labkit.room.settings.BOARD_SCOPES)")
    parser.add_argument("--labs-url", help="with --notebooks jupyter: where the labs are reached (the proxy, "
                        "e.g. http://proxy-public)")
    parser.add_argument("--grader", choices=("docker", "kubernetes"), default="docker",
                        help="run each check in a Docker container, or in a Kubernetes Pod (the board in the cluster)")
    parser.add_argument("--grader-image", help=f"default: room.json's grader_image, else {GRADER_IMAGE}")
    parser.add_argument("--participant-image", help="docker: build the grader image from it first (default: "
                        "room.json's image; with --grader-image and no room.json, the grader image must exist)")
    parser.add_argument("--poll-s", type=float, default=20.0, help="seconds between scans of the saved notebooks")
    parser.add_argument("--graders", type=int, default=2, help="grader runs at a time")
    parser.add_argument("--grader-cpu", type=float, default=Limits.cpu)
    parser.add_argument("--grader-memory", default=Limits.memory)
    parser.add_argument("--grader-timeout-s", type=float, default=Limits.timeout_s)
    return parser


def main(argv: list[str] | None = None) -> int:
    options = parser()
    args = options.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[board %(asctime)s] %(message)s")
    record = _room_record(args.room_dir)
    room_id = args.room_id or record.get("id") or record.get("room_id")
    participants = args.participants.split(",") if args.participants else list(record.get("participants", []))
    url, prefix = os.environ.get("JUPYTERHUB_SERVICE_URL"), os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
    if not room_id or not url or not prefix:
        options.error("needs --room-id (or room.json) and the hub's JUPYTERHUB_SERVICE_URL and "
                      "JUPYTERHUB_SERVICE_PREFIX: the hub starts the board as a service, or gives it those")
    if args.notebooks == "jupyter" and not (args.labs_url and os.environ.get("JUPYTERHUB_API_URL")):
        options.error("--notebooks jupyter needs --labs-url and the hub's JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN")
    source, runner = _parts(args, room_id, participants, record)
    board = Board(args.room_dir, room_id, participants, source, runner, args.poll_s, args.graders)
    return asyncio.run(_serve(board, urlparse(url), prefix))


def _parts(args: argparse.Namespace, room_id: str, participants: list[str],
           record: dict[str, Any]) -> tuple[NotebookSource, Runner]:
    """The board's source of notebooks and its grader runner, as the options name them."""
    image = args.grader_image or record.get("grader_image") or GRADER_IMAGE
    limits = Limits(args.grader_cpu, args.grader_memory, timeout_s=args.grader_timeout_s)
    client = None
    if args.notebooks == "volumes" or args.grader == "docker":
        from ..docker.engine import connect

        client = connect(timeout=600)
    source: NotebookSource
    if args.notebooks == "volumes":
        source = VolumeSource(client, room_id, image, {u: participant_volume(room_id, u) for u in participants})
    else:
        source = JupyterSource(os.environ["JUPYTERHUB_API_URL"], args.labs_url,
                               os.environ.get("JUPYTERHUB_API_TOKEN", ""), participants)
    runner: Runner
    if args.grader == "docker":
        runner = Grader(client, room_id, image, limits, base=args.participant_image or str(record.get("image", "")))
    else:
        from .pods import PodGrader

        runner = PodGrader(room_id, image, limits)
    return source, runner


async def _serve(board: Board, url: Any, prefix: str) -> int:
    server = make_app(board, prefix).listen(url.port or 80, url.hostname or "127.0.0.1")
    tasks = board.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("board of room %s at %s%s, %d participant(s)", board.room_id, url.geturl(), prefix,
             len(board.progress.participants))
    await stop.wait()
    server.stop()
    for task in tasks:
        task.cancel()
    await asyncio.get_running_loop().run_in_executor(None, board.sweep)
    board.pool.shutdown(wait=False, cancel_futures=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
