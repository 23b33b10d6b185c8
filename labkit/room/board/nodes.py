"""The board's watch on a swarm's nodes (a room started with `labkit room up --swarm`): which participants a
drained, down or gone node holds, for the page and ``api/progress``, and their labs started again, on the same
node with the same work, when the node returns.

Only labs that ended because their node went are started again (their spawner's state says so: see
labkit.room.hub.swarmspawner); a lab its participant or the culler stopped stays stopped. The board's token needs
``admin:server_state`` (to read that state) and ``servers`` (to start a lab): `room up --swarm` gives both.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from typing import Any

from ...errors import HubError, LabkitError
from ..hub import swarm_nodes
from ..hub.swarm_nodes import LabPlace
from ..hubclient import HubClient

log = logging.getLogger("labkit.room.board")
RETRY_S = 60.0  # a restart that did not take is tried again this long after (the node may be flapping)


class NodeWatch:
    """Every ``every_s`` seconds: each participant's node and its state, through the hub's API at ``hub_api``
    (with ``token``) and the swarm's manager engine ``client``; the labs to bring back are started."""

    def __init__(
        self, hub_api: str, token: str, client: Any, room_id: str, participants: list[str], every_s: float = 5.0
    ) -> None:
        self.hub = HubClient(hub_api, token, timeout_s=30)
        self.client = client
        self.room_id = room_id
        self.participants = set(participants)
        self.every_s = every_s
        self.places: dict[str, LabPlace] = {}
        self.error = ""
        self.restarted: dict[str, float] = {}  # login -> when the board last started their lab again

    def round(self) -> list[str]:
        """Look once; start the labs whose node came back. The logins started."""
        found = swarm_nodes.read_places(self.hub, self.client, self.room_id)
        self.places = {login: place for login, place in found.items() if login in self.participants}
        started = []
        for place in self.places.values():
            if not place.to_restart or time.monotonic() - self.restarted.get(place.login, -RETRY_S) < RETRY_S:
                continue
            self.restarted[place.login] = time.monotonic()
            try:
                self.hub.call(f"users/{place.login}/server", "POST")
            except HubError as exc:
                if exc.status_code != 400:  # 400: already starting (its participant came first)
                    log.warning("%s's lab not started again on %s: %s", place.login, place.node, exc)
                    continue
            log.info("%s's lab started again on %s (it ended with its node, which is back)", place.login, place.node)
            started.append(place.login)
        return started

    async def watch(self, pool: Executor | None = None) -> None:
        while True:
            try:
                await asyncio.get_running_loop().run_in_executor(pool, self.round)
                self.error = ""
            except LabkitError as exc:
                if str(exc) != self.error:
                    log.warning("%s", exc)
                self.error = str(exc)
            await asyncio.sleep(self.every_s)

    def notes(self) -> list[str]:
        """The page's lines: one per node that holds affected participants."""
        return swarm_nodes.notes(self.places)

    def table(self) -> dict[str, dict[str, str]]:
        """``api/progress``'s "nodes": every participant with a node, where and in what state."""
        return {
            login: {"node": p.node, "node_id": p.node_id, "node_state": p.node_state, "lab": p.lab, "why": p.why()}
            for login, p in sorted(self.places.items())
        }

    def close(self) -> None:
        self.hub.close()
