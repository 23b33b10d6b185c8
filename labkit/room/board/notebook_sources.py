"""Where the board finds participants' saved notebooks: a NotebookSource lists them with their mtimes
and reads one as a Submission (its exercise cells, parsed as JSON, never run).

- ``VolumeSource``: the Docker volumes of a room on one engine (`labkit room up`), watched by one
  long-lived container of the room (labkit.room.board.scanner; no network, volumes read-only).
- ``JupyterSource``: through JupyterHub, wherever the labs run (Kubernetes): the hub's REST API says
  whose lab is ready, each lab's Jupyter contents API lists and reads the notebooks. Its token needs
  ``BOARD_SCOPES`` (labkit.room.settings).
"""

from __future__ import annotations

import io
import json
import logging
import tarfile
import threading
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatch
from typing import Any, Protocol
from urllib.parse import quote

from ...course.catalogue import NOTEBOOKS
from ...docker.engine_errors import ENGINE_ERRORS
from ...errors import EngineError, HubError, SubmissionError, WaitTimeoutError
from ...plumbing.polling import wait_until
from ..cleanup import remove_containers
from ..hubclient import HubClient
from ..protocol import RESULT_MARK, ROLE_LABEL, ROOM_LABEL, Submission, submission_of
from ..settings import BOARD_SCOPES

log = logging.getLogger("labkit.room.notebook_sources")
VOLUMES_AT = "/in"  # each participant's volume at /in/<user>, read-only, in the scanning container


@dataclass(frozen=True)
class Saved:
    """A saved notebook: its ``mtime``; ``untouched``: known, without reading it, to hold every exercise
    cell as shipped (nothing to judge: all "not started")."""

    mtime: float
    untouched: bool = False


class NotebookSource(Protocol):
    def scan(self) -> dict[str, dict[str, Saved]]:
        """``{user: {notebook path in their work folder: Saved}}``; EngineError or SubmissionError when
        nothing could be listed."""

    def read(self, user: str, notebook: str) -> Submission:
        """``user``'s ``notebook`` as saved now; SubmissionError when it cannot be read."""

    def close(self) -> None:
        """Stop what the source runs (a scanning container)."""


FIRST_SCAN_S = 120.0  # the scanning container's start: python and labkit's imports


class VolumeSource:
    """The saved notebooks in ``volumes`` (``{user: Docker volume}``) of room ``room_id``, watched by one
    long-lived container of ``image`` (the grader image: ``python -m labkit.room.board.scanner``) on the engine
    ``client``. The container prints the notebooks each time one changes; a thread here follows its output,
    so a scan costs no container run and sees a save within a second. ``cgroup_parent``: the room's judging
    cgroup (labkit.room.cpu_cost.room_cgroup), where the scanner's CPU time is counted with the graders'."""

    needs_grader_image = True  # its scanner runs in the grader's image: no scan before the board's runner is ready

    def __init__(self, client: Any, room_id: str, image: str, volumes: dict[str, str], cgroup_parent: str = "") -> None:
        self.client = client
        self.cgroup_parent = cgroup_parent
        self.room_id = room_id
        self.image = image
        self.volumes = dict(volumes)
        self._scanner: tuple[Any, dict[str, dict[str, str]]] | None = None
        self._latest: dict[str, Any] | None = None  # the scanner's last line, parsed
        self._ended = ""  # why the scanner's output ended, when it did
        self._lock = threading.Lock()

    def scan(self) -> dict[str, dict[str, Saved]]:
        """Volumes that do not exist yet are skipped, never created; the scanner is made again when
        volumes appear (its mounts are fixed when it starts)."""
        try:
            existing = {v.name for v in self.client.volumes.list()}
            mounts = {v: {"bind": f"{VOLUMES_AT}/{u}", "mode": "ro"} for u, v in self.volumes.items() if v in existing}
            if not mounts:
                return {}
            self._container(mounts)
        except ENGINE_ERRORS as exc:
            self.close()
            raise EngineError(
                doing="run the room's notebook scan",
                detail=str(exc),
                remedy=f"Check the engine (`docker ps -a --filter label={ROOM_LABEL}={self.room_id}`) and the image {self.image}",
            ) from None
        try:
            found = wait_until(
                lambda: self._latest if self._latest is not None else self._failed(),
                FIRST_SCAN_S,
                "the room's first notebook scan",
                interval_s=0.05,
            )
        except WaitTimeoutError:
            found = {"": None}
        if not isinstance(found, dict) or "" in found:
            ended, self._ended = self._ended, ""
            self.close()
            raise EngineError(
                doing="keep the room's notebook scanner running",
                detail=ended or "no scan in time",
                remedy=f"check the grader image {self.image}",
            )
        return {u: {p: Saved(float(t), bool(same)) for p, (t, same) in paths.items()} for u, paths in found.items()}

    def _failed(self) -> dict[str, Any] | None:
        return {"": None} if self._ended else None

    def read(self, user: str, notebook: str) -> Submission:
        """Copied out of the scanning container (the Docker API's archive call: nothing runs)."""
        path = f"{VOLUMES_AT}/{user}/{notebook}"
        try:
            if self._scanner is None:
                raise SubmissionError(
                    detail="read before any scan",
                    remedy="scan first",
                    user=user,
                    notebook=notebook,
                    problem="unreachable",
                )
            stream, _ = self._scanner[0].get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = tar.next()
                extracted = tar.extractfile(member) if member is not None and member.isfile() else None
                data = extracted.read() if extracted is not None else b""
        except (*ENGINE_ERRORS, tarfile.TarError, AttributeError) as exc:
            raise SubmissionError(
                detail=str(exc),
                user=user,
                notebook=notebook,
                problem="unreachable",
            ) from None
        try:
            content = json.loads(data)
        except ValueError as exc:
            raise SubmissionError(
                detail=f"not valid JSON: {exc}",
                user=user,
                notebook=notebook,
                problem="unreadable",
            ) from None
        return submission_of(user, notebook, content, data)

    def _container(self, mounts: dict[str, dict[str, str]]) -> Any:
        if self._scanner is None or self._scanner[1] != mounts:
            self.close()
            container = self.client.containers.run(
                self.image,
                ["python3", "-m", "labkit.room.board.scanner", "--root", VOLUMES_AT],
                detach=True,
                network_mode="none",
                user="1000",
                volumes=mounts,
                mem_limit="256m",
                pids_limit=64,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                environment={"PYTHONUNBUFFERED": "1"},
                labels={ROOM_LABEL: self.room_id, ROLE_LABEL: "scan"},
                **({"cgroup_parent": self.cgroup_parent} if self.cgroup_parent else {}),
            )
            self._scanner = (container, mounts)
            threading.Thread(target=self._follow, args=(container,), name="room-scanner", daemon=True).start()
        return self._scanner[0]

    def _follow(self, container: Any) -> None:
        """Keep the scanner's last complete line; say why its output ended (it never ends while it is the
        room's scanner)."""
        text = ""
        try:
            for chunk in container.logs(stream=True, follow=True):
                text += chunk.decode(errors="replace")
                *lines, text = text.split("\n")
                for line in (x for x in lines if x.startswith(RESULT_MARK)):
                    found = json.loads(line[len(RESULT_MARK) :])
                    with self._lock:
                        if self._scanner is not None and self._scanner[0] is container:
                            self._latest = found
            why = f"its output ended: {text.strip()[-300:] or 'no output'}"
        except (*ENGINE_ERRORS, ValueError) as exc:
            why = str(exc)
        with self._lock:
            if self._scanner is not None and self._scanner[0] is container:
                self._ended = why

    def close(self) -> None:
        """Remove the scanning container, and any other of the room's (one the engine finished creating late)."""
        with self._lock:
            self._scanner, self._latest, self._ended = None, None, ""  # the scanner is one of them
        remove_containers(self.client, self.room_id, "scan")


class JupyterSource:
    """The saved notebooks of ``participants`` whose labs are ready, read through the hub's REST API at
    ``hub_api`` (e.g. http://hub:8081/hub/api) and the labs behind the proxy at ``labs_url`` (e.g.
    http://proxy-public), with ``token`` (BOARD_SCOPES). A stopped lab is not listed: its marks stay."""

    needs_grader_image = False

    def __init__(self, hub_api: str, labs_url: str, token: str, participants: list[str], timeout_s: float = 30) -> None:
        self.hub_api = hub_api.rstrip("/")
        self.labs_url = labs_url.rstrip("/")
        self.participants = set(participants)
        self.client = HubClient(self.hub_api, token, timeout_s)
        self.servers: dict[str, str] = {}  # user -> their lab's URL path, from the last scan

    def scan(self) -> dict[str, dict[str, Saved]]:
        self.servers = self._ready_labs()
        found: dict[str, dict[str, Saved]] = {}
        for user, path in sorted(self.servers.items()):
            try:
                found[user] = self._notebooks(user, path)
            except SubmissionError as exc:
                if exc.problem == "refused":  # the token's scopes: no lab would answer; say so on the board
                    raise
                log.info("%s", exc)  # a lab stopping or starting: the next scan sees it
        return found

    def read(self, user: str, notebook: str) -> Submission:
        path = self.servers.get(user, f"/user/{quote(user, safe='')}/")
        url = f"{self.labs_url}{path}api/contents/{quote(notebook)}"
        try:
            model = self._get(url, {"content": "1", "type": "notebook"}, user, notebook)
        except SubmissionError as exc:
            if exc.status_code != 400:  # Jupyter's contents API answers 400 for a file it cannot read as a notebook
                raise
            raise SubmissionError(
                user=user,
                notebook=notebook,
                problem="unreadable",
                status_code=400,
            ) from None
        content = model.get("content") if isinstance(model, dict) else None
        return submission_of(user, notebook, content, json.dumps(content, indent=1).encode() if content else b"")

    def close(self) -> None:
        self.client.close()

    def _ready_labs(self) -> dict[str, str]:
        """``{user: lab URL path}`` of the participants whose default server is ready (the hub pages its
        user list: 200 at most a page)."""
        labs: dict[str, str] = {}
        offset = 0
        while True:
            page = self._get(
                f"{self.hub_api}/users",
                {"state": "ready", "offset": str(offset), "limit": "200"},
                headers={"Accept": "application/jupyterhub-pagination+json"},
            )
            items = page.get("items", []) if isinstance(page, dict) else page
            for user in items:
                server = (user.get("servers") or {}).get("", {})
                if user.get("name") in self.participants and server.get("ready") and server.get("url"):
                    labs[user["name"]] = server["url"]
            following = (page.get("_pagination") or {}).get("next") if isinstance(page, dict) else None
            if not following or not items:
                return labs
            offset = int(following.get("offset", offset + len(items)))

    def _notebooks(self, user: str, path: str) -> dict[str, Saved]:
        """The workshop notebooks in the work folder and one folder down, as the volume scan finds them."""
        found: dict[str, Saved] = {}
        folders = [""]
        while folders:
            folder = folders.pop()
            listing = self._get(f"{self.labs_url}{path}api/contents/{quote(folder)}", {"content": "1"}, user, folder)
            for entry in listing.get("content") or []:
                if entry.get("type") == "directory" and not folder and not entry["name"].startswith("."):
                    folders.append(entry["path"])
                elif entry.get("type") == "notebook" and fnmatch(entry["name"], NOTEBOOKS):
                    found[entry["path"]] = Saved(_timestamp(entry.get("last_modified", "")))
        return found

    def _get(
        self,
        url: str,
        params: dict[str, str],
        user: str = "",
        notebook: str = "",
        headers: dict[str, str] | None = None,
    ) -> Any:
        try:
            return self.client.call(url, params=params, headers=headers)
        except HubError as exc:
            if exc.status_code in (401, 403):  # a redirect is a lab stopping: the hub's spawn page
                raise SubmissionError(
                    detail=f"{url} refused the board's token",
                    remedy=f"give the board's service a role with the scopes {', '.join(BOARD_SCOPES)}",
                    user=user,
                    notebook=notebook,
                    problem="refused",
                    status_code=exc.status_code,
                ) from None
            raise SubmissionError(
                detail=str(exc).splitlines()[0],
                remedy="it is tried again at the next scan",
                user=user,
                notebook=notebook,
                problem="unreachable",
                status_code=exc.status_code,
            ) from None


def _timestamp(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
