"""The teacher's board: a JupyterHub service at ``/services/board/`` showing participants × exercises.

    python -m labkit.room.board --room-dir room [--room-id ID] [--participants p01,p02] [--poll-s 1]

The hub starts it as a managed service (it passes JUPYTERHUB_API_TOKEN, JUPYTERHUB_SERVICE_URL,
JUPYTERHUB_SERVICE_PREFIX, ...). JupyterHub's own OAuth (``HubOAuthenticated``) guards every page: only
holders of ``access:services!service=board`` (the room's teacher role) get in; anyone else gets 403, or
the hub's login page first. Every ``poll_s`` seconds (and on ``POST api/refresh``) the board lists the
saved notebooks (``labkit.room.notebook_sources``: the room's Docker volumes, which a scanner watches, or each lab's
Jupyter API through the hub) and queues each new save; the exercise cells that changed go to a grader
(``labkit.room.grader``: a warm container with no network; ``labkit.room.pods`` on Kubernetes), ``graders``
at a time. Marks go to ``<room dir>/progress.json``.

    GET  /services/board/               the grid (refreshes itself; ?sort=name|solved, ?user=LOGIN: one's detail)
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
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from ..errors import LabkitError
from ..exercises import REGISTRY
from . import progress as progress_store, record as room_record
from .grader import Grader, Limits, Runner, untouched_results
from .notebook_sources import JupyterSource, NotebookSource, VolumeSource
from .record import RoomRecord
from .settings import GRADER_IMAGE, volume_name
from .submission import is_started
from .verdicts import RoomVerdict

log = logging.getLogger("labkit.room.board")
REFRESH_PAGE_S = 30  # the page reloads itself (the engine's and the scan's state) ...
CHANGES_S = 2  # ... and at once when a mark changed: it asks api/progress every CHANGES_S
# Reload only when a mark changed, so that a hover or a detail being read is not lost every few seconds.
WATCH = (
    "<script>let seen=null;setInterval(async()=>{try{const r=await fetch('api/progress',"
    "{credentials:'same-origin'});if(!r.ok)return;const t=await r.text();if(seen!==null&&t!==seen)"
    f"location.reload();seen=t;}}catch(e){{}}}},{CHANGES_S * 1000});</script>"
)


class Board:
    """The watch loop: scan the ``source``, queue new saves, judge them ``graders`` at a time with the
    ``runner``, keep the marks."""

    def __init__(
        self,
        room_dir: Path,
        room_id: str,
        participants: list[str],
        source: NotebookSource,
        runner: Runner,
        poll_s: float = 20.0,
        graders: int = 2,
    ) -> None:
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
        await self.prepared.wait()
        while True:
            user, notebook, mtime = await self.queue.get()
            try:
                await self._judge(user, notebook, mtime)
            except LabkitError as exc:  # unreadable now: queued again at the next scan
                log.warning("%s %s: %s", user, notebook, exc)
            finally:
                self.pending.discard((user, notebook))

    async def _judge(self, user: str, notebook: str, mtime: float) -> None:
        """Judge the exercise cells of one save that changed since their verdicts; a cell put back to its
        starter is "not started" without a run, and a save that changed nothing keeps its marks."""
        loop = asyncio.get_running_loop()
        submission = await loop.run_in_executor(self.pool, self.source.read, user, notebook)
        starters = [
            r for r in untouched_results(notebook) if not is_started(r.exercise, submission.cells.get(r.exercise, "\0"))
        ]
        changed = self.progress.changed(user, submission.cells)
        if not changed:
            self._record(user, notebook, mtime, starters)
            return
        judgement = await loop.run_in_executor(self.pool, self.runner.judge, replace(submission, judge=tuple(changed)))
        log.info(
            "%s %s (%s) judged in %.1f s%s",
            user,
            notebook,
            ", ".join(changed),
            judgement.seconds,
            f" ({judgement.error})" if judgement.error else "",
        )
        if judgement.error:  # no digest: the same cells are judged again at the next save
            verdicts = [r for r in judgement.results if r.exercise in changed]
        else:
            verdicts = [replace(r, digest=changed.get(r.exercise, "")) for r in judgement.results]
        self._record(user, notebook, mtime, starters + verdicts)

    def _record(self, user: str, notebook: str, mtime: float, results: list[RoomVerdict]) -> None:
        self.progress.record(user, notebook, mtime, results)
        try:
            progress_store.save(self.room_dir, self.progress)
        except (LabkitError, OSError) as exc:  # the marks stay in memory (the page, the API); say why not on disk
            log.warning("%s", exc)

    def start(self) -> list[asyncio.Task[None]]:
        return [asyncio.ensure_future(self.watch())] + [
            asyncio.ensure_future(self.judge_forever()) for _ in range(self.graders)
        ]

    def sweep(self) -> None:
        """Stop the source's scanner and remove the room's grader runs still there (the board is stopping)."""
        self.source.close()
        self.runner.close()


MARKS = {progress_store.PASSED: "\u2713", progress_store.NOT_YET: "\u2717", progress_store.NOT_STARTED: "\u00b7"}
SORTS = ("name", "solved")
# One screen (1600×900) holds 50 participants × every exercise: small type, one mark per cell, the words on hover.
STYLE = """body{font:12px/1.2 sans-serif;margin:6px 10px} h1{font-size:15px;margin:0 0 2px}
p{margin:2px 0} form{display:inline} .top{display:flex;gap:12px;align-items:baseline;flex-wrap:wrap}
table{border-collapse:collapse;font-size:12px;line-height:14px} td,th{border:1px solid #ccc;padding:0 3px}
thead th{font-weight:normal;max-width:64px;overflow-wrap:anywhere;vertical-align:bottom;font-size:10px}
thead th.who,thead th.n{font-weight:bold;font-size:11px} th a{color:inherit} tbody th{text-align:left;font-weight:normal}
td{text-align:center;min-width:24px;cursor:default} td.n{font-weight:bold}
.passed{background:#bfeebf;color:#064} .not-yet{background:#fbd3ad;color:#a40} .not-started{background:#f0f0f0;color:#999}
tfoot th,tfoot td{background:#f6f6ff;font-weight:bold} .error{color:#a00} .legend span{padding:0 4px}
.detail td{text-align:left;max-width:60em}"""


def _status(board: Board) -> tuple[str, str]:
    queued = len(board.pending)
    status = f"{queued} notebook(s) waiting for the grader" if queued else "every saved notebook is judged"
    if not board.prepared.is_set():
        status = f"preparing the grader {board.runner.image} (building its image takes minutes, once)"
        if board.prepare_error:
            status = f"the grader {board.runner.image} is not ready; trying again"
    error = "".join(f"<p class='error'>{html.escape(e)}</p>" for e in (board.prepare_error, board.last_scan_error) if e)
    return status, error


def _note(mark: progress_store.Mark) -> str:
    return " ".join(x for x in (mark.problem, f"Hint: {mark.hint}" if mark.hint else "") if x)


def render_page(board: Board, xsrf_form: str = "", sort: str = "name", user: str = "") -> str:
    """The grid: one row per participant, one column per exercise, one mark and colour per cell (its problem
    and hint on hover), sortable by name or by number solved, with a row of how many passed each exercise;
    with ``user``, that participant's detail (every exercise's state, problem and hint)."""
    ids = progress_store.exercise_ids()
    participants = list(board.progress.participants)
    marks = {u: {e: board.progress.mark(u, e) for e in ids} for u in participants}
    solved = {u: sum(m.state == progress_store.PASSED for m in marks[u].values()) for u in participants}
    status, error = _status(board)
    title = f"labkit room {html.escape(board.room_id)}"
    head = (
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='{REFRESH_PAGE_S}'>"
        f"<title>{title}</title><style>{STYLE}</style>{WATCH}</head><body>"
    )
    if user in marks:
        rows = "".join(
            f"<tr><th>{html.escape(e)}</th><td>{html.escape(REGISTRY[e].title)}</td>"
            f"<td class='{marks[user][e].state.replace(' ', '-')}'>{MARKS[marks[user][e].state]} {marks[user][e].state}</td>"
            f"<td>{html.escape(_note(marks[user][e]))}</td></tr>"
            for e in ids
        )
        return (
            f"{head}<h1>Room {html.escape(board.room_id)}: {html.escape(user)}, {solved[user]} of {len(ids)} "
            f"solved</h1><p><a href='?'>back to the room</a></p>{error}<table class='detail'><tr><th>exercise</th>"
            f"<th>what it asks</th><th>state</th><th>problem and hint</th></tr>{rows}</table></body></html>"
        )
    order = sorted(participants, key=lambda u: (-solved[u], u)) if sort == "solved" else sorted(participants)
    columns = "".join(
        f"<th title='{html.escape(e)}: {html.escape(REGISTRY[e].title)}'>{html.escape(e)}</th>" for e in ids
    )
    grid_rows: list[str] = []
    for u in order:
        cells = "".join(
            f"<td class='{m.state.replace(' ', '-')}' title='{html.escape(f'{u} · {e}: {m.state}. {_note(m)}'.strip())}'>"
            f"{MARKS[m.state]}</td>"
            for e, m in marks[u].items()
        )
        grid_rows.append(
            f"<tr><th><a href='?user={html.escape(u)}'>{html.escape(u)}</a></th>{cells}"
            f"<td class='n'>{solved[u]}</td></tr>"
        )
    passed = [sum(marks[u][e].state == progress_store.PASSED for u in participants) for e in ids]
    summary = "".join(
        f"<td title='{n} of {len(participants)} passed {html.escape(e)}'>{n}</td>" for e, n in zip(ids, passed)
    )
    sorted_by = "<b>{}</b>"
    by_name = sorted_by.format("participant") if sort != "solved" else "<a href='?sort=name'>participant</a>"
    by_solved = sorted_by.format("solved") if sort == "solved" else "<a href='?sort=solved'>solved</a>"
    legend = (
        "<span class='passed'>\u2713 passed</span><span class='not-yet'>\u2717 not yet</span>"
        "<span class='not-started'>\u00b7 not started</span> hover a cell for its problem and hint; "
        "click a name for its detail"
    )
    return (
        f"{head}<div class='top'><h1>Room {html.escape(board.room_id)}</h1><span>{len(participants)} participants, "
        f"{sum(passed)} passed of {len(participants) * len(ids)}; {status}; a new mark shows within {CHANGES_S} s</span>"
        f"<form method='post' action='api/refresh'>{xsrf_form}<button>look for saved notebooks now</button></form>"
        f"<span class='legend'>{legend}</span></div>{error}"
        f"<table id='grid'><thead><tr><th class='who'>{by_name}</th>{columns}<th class='n'>{by_solved}</th></tr></thead>"
        f"<tbody>{''.join(grid_rows)}</tbody><tfoot><tr><th>passed</th>{summary}<td>{sum(passed)}</td></tr></tfoot>"
        "</table></body></html>"
    )


class _Handler(HubOAuthenticated, web.RequestHandler):
    @property
    def board(self) -> Board:
        return self.settings["board"]


class PageHandler(_Handler):
    @web.authenticated
    def get(self) -> None:
        sort = self.get_argument("sort", "name")
        self.write(
            render_page(
                self.board, self.xsrf_form_html(), sort if sort in SORTS else "name", self.get_argument("user", "")
            )
        )


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
    return web.Application(
        [
            (prefix, PageHandler),
            (prefix + "api/progress", ProgressHandler),
            (prefix + "api/refresh", RefreshHandler),
            (prefix + "oauth_callback", HubOAuthCallbackHandler),
        ],
        board=board,
        prefix=prefix,
        cookie_secret=os.urandom(32),
        xsrf_cookies=False,
    )


def parser() -> argparse.ArgumentParser:
    """The board's command line (`room up` and the Kubernetes values write one)."""
    parser = argparse.ArgumentParser(prog="python -m labkit.room.board", description=__doc__.split("\n\n")[0])
    parser.add_argument("--room-dir", type=Path, required=True)
    parser.add_argument("--room-id", help="default: room.json's id")
    parser.add_argument("--participants", help="comma-separated logins; default: room.json's participants")
    parser.add_argument(
        "--notebooks",
        choices=("volumes", "jupyter"),
        default="volumes",
        help="read saved notebooks from the room's Docker volumes, or from each lab's Jupyter API "
        "through the hub (the token needs labkit.room.settings.BOARD_SCOPES)",
    )
    parser.add_argument(
        "--labs-url", help="with --notebooks jupyter: where the labs are reached (the proxy, e.g. http://proxy-public)"
    )
    parser.add_argument(
        "--grader",
        choices=("docker", "kubernetes"),
        default="docker",
        help="run each check in a Docker container, or in a Kubernetes Pod (the board in the cluster)",
    )
    parser.add_argument("--grader-image", help=f"default: room.json's grader_image, else {GRADER_IMAGE}")
    parser.add_argument(
        "--participant-image",
        help="docker: build the grader image from it first (default: "
        "room.json's image; with --grader-image and no room.json, the grader image must exist)",
    )
    parser.add_argument(
        "--poll-s",
        type=float,
        help="seconds between scans of the saved notebooks (default: 1 "
        "for volumes, which a scanner watches; 20 for jupyter, which costs each lab a listing)",
    )
    parser.add_argument("--graders", type=int, default=2, help="grader runs at a time")
    parser.add_argument("--grader-cpu", type=float, default=Limits.cpu)
    parser.add_argument("--grader-memory", default=Limits.memory)
    parser.add_argument("--grader-timeout-s", type=float, default=Limits.timeout_s)
    return parser


def main(argv: list[str] | None = None) -> int:
    options = parser()
    args = options.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[board %(asctime)s] %(message)s")
    record = room_record.read_if_any(args.room_dir) or RoomRecord()
    room_id = args.room_id or record.room_id
    participants = args.participants.split(",") if args.participants else list(record.participants)
    url, prefix = os.environ.get("JUPYTERHUB_SERVICE_URL"), os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
    if not room_id or not url or not prefix:
        options.error(
            "needs --room-id (or room.json) and the hub's JUPYTERHUB_SERVICE_URL and "
            "JUPYTERHUB_SERVICE_PREFIX: the hub starts the board as a service, or gives it those"
        )
    if args.notebooks == "jupyter" and not (args.labs_url and os.environ.get("JUPYTERHUB_API_URL")):
        options.error("--notebooks jupyter needs --labs-url and the hub's JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN")
    source, runner = _parts(args, room_id, participants, record)
    poll_s = args.poll_s if args.poll_s is not None else (1.0 if args.notebooks == "volumes" else 20.0)
    board = Board(args.room_dir, room_id, participants, source, runner, poll_s, args.graders)
    return asyncio.run(_serve(board, urlparse(url), prefix))


def _parts(
    args: argparse.Namespace, room_id: str, participants: list[str], record: RoomRecord
) -> tuple[NotebookSource, Runner]:
    """The board's source of notebooks and its grader runner, as the options name them."""
    image = args.grader_image or record.grader_image or GRADER_IMAGE
    limits = Limits(args.grader_cpu, args.grader_memory, timeout_s=args.grader_timeout_s)
    client = None
    if args.notebooks == "volumes" or args.grader == "docker":
        from ..docker.engine import connect

        client = connect(timeout=600)
    source: NotebookSource
    if args.notebooks == "volumes":
        source = VolumeSource(client, room_id, image, {u: volume_name(room_id, u) for u in participants})
    else:
        source = JupyterSource(
            os.environ["JUPYTERHUB_API_URL"], args.labs_url, os.environ.get("JUPYTERHUB_API_TOKEN", ""), participants
        )
    runner: Runner
    if args.grader == "docker":
        runner = Grader(
            client, room_id, image, limits, base=args.participant_image or record.image, warm=max(1, args.graders)
        )
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
    log.info(
        "board of room %s at %s%s, %d participant(s)",
        board.room_id,
        url.geturl(),
        prefix,
        len(board.progress.participants),
    )
    await stop.wait()
    server.stop()
    for task in tasks:
        task.cancel()
    await asyncio.get_running_loop().run_in_executor(None, board.sweep)
    board.pool.shutdown(wait=False, cancel_futures=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
