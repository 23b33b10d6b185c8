"""The teacher's board: a JupyterHub service at ``/services/board/`` showing participants × exercises.

    python -m labkit.room.board.service --room-dir room [--room-id ID] [--participants p01,p02] [--poll-s 1]

The hub starts it as a managed service (it passes JUPYTERHUB_API_TOKEN, JUPYTERHUB_SERVICE_URL,
JUPYTERHUB_SERVICE_PREFIX, ...). JupyterHub's own OAuth (``HubOAuthenticated``) guards every page: only
holders of ``access:services!service=board`` (the room's teacher role) get in; anyone else gets 403, or
the hub's login page first. Every ``poll_s`` seconds (and on ``POST api/refresh``) the board lists the
saved notebooks (``labkit.room.board.notebook_sources``: the room's Docker volumes, which a scanner watches, or each lab's
Jupyter API through the hub) and queues each new save; the exercise cells that changed go to a grader
(``labkit.room.grader.runner``: a warm container with no network; ``labkit.room.grader.swarm_runner``: a
service on a swarm's worker; ``labkit.room.k8s.pods`` on Kubernetes), ``graders``
at a time (a failed run is judged again; see Board). Marks go to ``<room dir>/progress.json``.

    GET  /services/board/               the grid (updates itself; ?sort=name|solved, ?user=LOGIN: one's detail)
    GET  /services/board/api/progress   {"participants": {"p01": {"01-bad-request": "passed", ...}, ...}, "status": ...}
    POST /services/board/api/refresh    look for saved notebooks now
    POST /services/board/api/rejudge    user=LOGIN: judge every saved notebook of theirs again
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from .. import record as room_record
from ..cpu_cost import engine_cgroups, room_cgroup
from ..grader.runner import Grader, Limits, Runner
from ..record import RoomRecord
from ..settings import GRADER_IMAGE, volume_name
from .nodes import NodeWatch
from .notebook_sources import JupyterSource, NotebookSource, VolumeSource
from .page import SORTS, PageState, render_page
from .watch import Board

log = logging.getLogger("labkit.room.board")


class _Handler(HubOAuthenticated, web.RequestHandler):
    @property
    def board(self) -> Board:
        return self.settings["board"]

    def answer(self, body: dict[str, Any], page: str) -> None:
        """JSON for a script or a token; the page again for the teacher's browser (a form's POST)."""
        if "application/json" in self.request.headers.get("Accept", "") or "Authorization" in self.request.headers:
            self.write(body)
        else:
            self.redirect(page)


def _page_state(board: Board, nodes: NodeWatch | None) -> PageState:
    """What the page shows of ``board`` besides the marks: the room, the queue's state, errors to show, and on
    a swarm the nodes that hold affected participants."""
    errors = (board.prepare_error, board.last_scan_error, nodes.error if nodes else "")
    return PageState(board.room_id, board.status(), errors, tuple(nodes.notes()) if nodes else ())


class PageHandler(_Handler):
    @web.authenticated
    def get(self) -> None:
        sort = self.get_argument("sort", "name")
        sort = sort if sort in SORTS else "name"
        user = self.get_argument("user", "")
        board = self.board
        self.write(
            render_page(
                board.progress,
                _page_state(board, self.settings["nodes"]),
                self.xsrf_token.decode(),
                self.xsrf_form_html(),
                sort,
                user,
            )
        )


class ProgressHandler(_Handler):
    @web.authenticated
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        table = self.board.progress.table()
        nodes = self.settings["nodes"]
        self.write(json.dumps({**table, "status": self.board.status(), **({"nodes": nodes.table()} if nodes else {})}))


class RefreshHandler(_Handler):
    @web.authenticated
    async def post(self) -> None:
        queued = await self.board.poll_once()
        self.answer({"queued": queued}, self.settings["prefix"])


class RejudgeHandler(_Handler):
    @web.authenticated
    async def post(self) -> None:
        user = self.get_argument("user")
        if user not in self.board.progress.participants:
            raise web.HTTPError(404, f"no participant {user!r} in this room")
        queued = await self.board.rejudge(user)
        self.answer({"queued": queued}, f"{self.settings['prefix']}?{urlencode({'user': user})}")


def make_app(board: Board, prefix: str, nodes: NodeWatch | None = None) -> web.Application:
    return web.Application(
        [
            (prefix, PageHandler),
            (prefix + "api/progress", ProgressHandler),
            (prefix + "api/refresh", RefreshHandler),
            (prefix + "api/rejudge", RejudgeHandler),
            (prefix + "oauth_callback", HubOAuthCallbackHandler),
        ],
        board=board,
        prefix=prefix,
        nodes=nodes,
        cookie_secret=os.urandom(32),
        xsrf_cookies=False,
    )


def parser() -> argparse.ArgumentParser:
    """The board's command line (`room up` and the Kubernetes values write one)."""
    parser = argparse.ArgumentParser(prog="python -m labkit.room.board.service", description=__doc__.split("\n\n")[0])
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
        choices=("docker", "swarm", "kubernetes"),
        default="docker",
        help="run each check in a Docker container, in a Swarm service on a worker (the engine: the swarm's "
        "manager), or in a Kubernetes Pod (the board in the cluster)",
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
    parser.add_argument(
        "--swarm",
        action="store_true",
        help="the labs run on the swarm this engine manages: name the participants a drained or down node "
        "holds, and start their labs again when it returns (the token needs admin:server_state and servers)",
    )
    parser.add_argument("--graders", type=int, default=2, help="grader runs at a time")
    parser.add_argument(
        "--slow-s",
        type=float,
        default=10.0,
        help="a run this long frees its grader for the queue (a runaway exercise holds none; default %(default)s)",
    )
    parser.add_argument(
        "--tries", type=int, default=3, help="grader runs per save when a run fails outside the participant's code"
    )
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
    if args.swarm and not os.environ.get("JUPYTERHUB_API_URL"):
        options.error("--swarm needs the hub's JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN")
    source, runner = _parts(args, room_id, participants, record)
    poll_s = args.poll_s if args.poll_s is not None else (1.0 if args.notebooks == "volumes" else 20.0)
    board = Board(
        args.room_dir, room_id, participants, source, runner, poll_s, args.graders, tries=args.tries, slow_s=args.slow_s
    )
    nodes = None
    if args.swarm:
        from ...docker.engine import connect

        hub_api, token = os.environ["JUPYTERHUB_API_URL"], os.environ.get("JUPYTERHUB_API_TOKEN", "")
        nodes = NodeWatch(hub_api, token, connect(timeout=60), room_id, participants)
    return asyncio.run(_serve(board, urlparse(url), prefix, nodes))


def _parts(
    args: argparse.Namespace, room_id: str, participants: list[str], record: RoomRecord
) -> tuple[NotebookSource, Runner]:
    """The board's source of notebooks and its grader runner, as the options name them."""
    image = args.grader_image or record.grader_image or GRADER_IMAGE
    limits = Limits(args.grader_cpu, args.grader_memory, timeout_s=args.grader_timeout_s)
    client, cgroup = None, ""
    if args.notebooks == "volumes" or args.grader in ("docker", "swarm"):
        from ...docker.engine import connect

        client = connect(timeout=600)
        cgroup = room_cgroup(room_id, engine_cgroups(client)[0])
    source: NotebookSource
    if args.notebooks == "volumes":
        source = VolumeSource(client, room_id, image, {u: volume_name(room_id, u) for u in participants}, cgroup)
    else:
        source = JupyterSource(
            os.environ["JUPYTERHUB_API_URL"], args.labs_url, os.environ.get("JUPYTERHUB_API_TOKEN", ""), participants
        )
    runner: Runner
    if args.grader == "docker":
        runner = Grader(
            client,
            room_id,
            image,
            limits,
            base=args.participant_image or record.image,
            warm=max(1, args.graders),
            cgroup_parent=cgroup,
        )
    elif args.grader == "swarm":
        from ..grader.swarm_runner import SwarmGrader

        runner = SwarmGrader(client, room_id, image, limits)
    else:
        from ..k8s.pods import PodGrader

        runner = PodGrader(room_id, image, limits)
    return source, runner


async def _serve(board: Board, url: Any, prefix: str, nodes: NodeWatch | None = None) -> int:
    server = make_app(board, prefix, nodes).listen(url.port or 80, url.hostname or "127.0.0.1")
    tasks = board.start() + ([asyncio.ensure_future(nodes.watch())] if nodes else [])
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
    board.stop()
    await asyncio.get_running_loop().run_in_executor(None, board.sweep)
    board.pool.shutdown(wait=False, cancel_futures=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
