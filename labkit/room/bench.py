"""`labkit room bench --participants N`: a real room, measured. It starts a room (`room up`), starts every
participant's lab through the hub's REST API, runs `labkit.start()` in one lab over the Jupyter kernel
protocol, saves a notebook in every lab at once and waits for the board's verdicts, then saves it once more
in one lab alone (a quiet room) and waits for that verdict, then takes the room down.

Printed: seconds until the hub answers and until all labs are ready; per lab, its ready time; the memory of
one idle lab (Docker's figure, as `docker stats` shows it) before and with Triton running; per check
(a grader run of one saved notebook, i.e. that notebook's exercises) p50/p95 of the time from the save to
its verdict on the board, and the same for the save alone; ``core_s_per_save``, what a verdict costs in CPU
(labkit.room.cpu_cost): the core-seconds of the board and of the room's judging containers (every grader run,
the warm-ups the saves started, the notebook scanner) from the first save until the room is idle again after
the last verdict (its graders warm and waiting), divided by the verdicts. Beside it, ``graders_reported_s``: the
same saves' graders as they reported their own CPU (each read its container's cgroup; the board adds them up),
which should match the cgroup figure on one engine.

With ``--swarm`` (labkit.room.bench_swarm) the labs and graders run on the workers: a lab's memory is read
through its node's engine (``--node-engine``; none without), graders are cold services (nothing to wait for
after a verdict), and ``core_s_per_save`` is the board's CPU (by pid, on the manager) plus the graders' own
reports, per verdict. Nothing is asserted: the numbers depend on the machine.
"""

from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..docker.engine import connect
from ..docker.engine_errors import ENGINE_ERRORS
from ..errors import LabKernelError, WaitTimeoutError
from ..plumbing.downloads import say
from ..plumbing.polling import wait_until
from . import cpu_cost, record as room_record
from .bench_swarm import lab_on_its_node
from .cpu_cost import CpuMeter
from .hubclient import HubClient, default_server
from .protocol import RESULT_MARK, ROLE_LABEL, ROOM_LABEL, WARM_MARK
from .settings import RoomSettings

START_CODE = "import labkit\nlab = labkit.start()"
SAVED_NOTEBOOK = "01_python_backend.ipynb"


@dataclass
class RoomBench:
    """What one bench run measured (seconds, bytes)."""

    participants: int
    swarm: bool = False  # the room ran on a swarm (`--swarm`): labs and graders on its workers
    up_s: float = 0.0  # `room up` until the hub answers (images built or reused included)
    all_ready_s: float = 0.0  # first start request until the last lab is ready
    ready_s: dict[str, float] = field(default_factory=dict)
    lab_memory_idle: int | None = None  # one lab, JupyterLab only (None: not read, see bench_swarm)
    lab_memory_triton: int | None = None  # the same lab after `labkit.start()` in a kernel (Triton 23.12 running)
    triton_start_s: float = 0.0  # that `labkit.start()` cell, as the kernel ran it
    checks: dict[str, list[float]] = field(default_factory=dict)  # notebook -> save-to-verdict seconds
    checks_missing: int = 0  # saves without a verdict when the bench stopped waiting
    single_s: float | None = None  # then one save in a quiet room, to its verdict (None: not measured)
    single_missing: bool = False  # that save had no verdict when the bench stopped waiting
    notebook: str = SAVED_NOTEBOOK  # the notebook saved (its first exercise solved, then its second)
    core_s_per_save: float | None = None  # core-seconds per verdict of the saves at once (None: no verdict)
    cpu_s: dict[str, float] = field(default_factory=dict)  # those saves' core-seconds, by source
    graders_reported_s: float | None = None  # those saves' graders' core-seconds as they reported them
    graders_unreported: int = 0  # grader runs of those saves that reported no figure
    single_core_s: float | None = None  # the save alone's core-seconds (its warm-up included)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "checks": {nb: _summary(v) for nb, v in self.checks.items()}}


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    p50, p95 = np.percentile(values, [50, 95])
    return {"n": len(values), "p50_s": float(p50), "p95_s": float(p95), "max_s": float(max(values))}


def report(result: RoomBench) -> str:
    """The numbers as a few lines of text."""
    mib = 1024 * 1024
    lines = [
        f"room bench, {result.participants} participant(s){' on a swarm' if result.swarm else ''}",
        f"  room up (hub answers):           {result.up_s:7.1f} s",
        f"  all labs ready (from start):     {result.all_ready_s:7.1f} s",
        f"  lab ready p50/p95:               {_pcts(list(result.ready_s.values()))}",
    ]
    if result.lab_memory_idle is not None and result.lab_memory_triton is not None:
        lines.append(f"  one idle lab (JupyterLab):       {result.lab_memory_idle / mib:7.0f} MiB")
        lines.append(f"  same lab, Triton running:        {result.lab_memory_triton / mib:7.0f} MiB")
    else:
        lines.append("  lab memory:                      not read (no --node-engine reaches the lab's node)")
    lines.append(f"  labkit.start() in one lab:       {result.triton_start_s:7.1f} s")
    for notebook, values in sorted(result.checks.items()):
        lines.append(f"  check {notebook}: save -> verdict {_pcts(values)} (n={len(values)})")
    if result.core_s_per_save is not None:
        parts = ", ".join(f"{name} {seconds:.1f}" for name, seconds in sorted(result.cpu_s.items()))
        lines.append(f"  core_s_per_save:                 {result.core_s_per_save:7.2f} core-s ({parts} in all)")
    if result.graders_reported_s is not None:
        unreported = f", {result.graders_unreported} run(s) without a figure" if result.graders_unreported else ""
        lines.append(f"  graders, as they reported:       {result.graders_reported_s:7.1f} core-s{unreported}")
    if result.single_missing:
        lines.append("  one save alone: no verdict when the bench stopped waiting")
    else:
        single = "      -" if result.single_s is None else f"{result.single_s:7.1f} s"
        lines.append(f"  one save alone: save -> verdict  {single}")
        if result.single_core_s is not None:
            lines.append(f"  one save alone, CPU:             {result.single_core_s:7.2f} core-s")
    if result.checks_missing:
        lines.append(f"  {result.checks_missing} saved notebook(s) had no verdict yet when the bench stopped waiting")
    return "\n".join(lines)


def _pcts(values: list[float]) -> str:
    s = _summary(values)
    return f"{s['p50_s']:.1f} s / {s['p95_s']:.1f} s" if s["n"] else "-"


def start_labs(room: HubClient, users: tuple[str, ...], timeout_s: float) -> dict[str, float]:
    """Ask the hub to start every lab at once; seconds until each one was ready."""
    t0 = time.monotonic()
    with ThreadPoolExecutor(min(16, len(users))) as pool:
        list(pool.map(lambda u: room.call(f"hub/api/users/{u}/server", "POST", timeout_s=timeout_s), users))
    ready: dict[str, float] = {}

    def all_ready() -> bool:
        for user in room.call("hub/api/users"):
            if user["name"] in users and user["name"] not in ready and default_server(user).get("ready"):
                ready[user["name"]] = time.monotonic() - t0
        return len(ready) == len(users)

    try:
        wait_until(all_ready, timeout_s - (time.monotonic() - t0), "every lab to be ready", interval_s=0.25)
    except WaitTimeoutError:
        raise WaitTimeoutError(
            what=f"labs of {sorted(set(users) - set(ready))} to be ready", timeout_s=timeout_s
        ) from None
    return ready


def run_in_lab(room: HubClient, user: str, code: str, timeout_s: float = 300) -> tuple[str, float]:
    """Run ``code`` in a new kernel of ``user``'s lab over the kernel websocket (Jupyter's messaging
    protocol, messages made by jupyter_client's Session); its kernel id and how long the cell took.
    The kernel stays (Triton with it) until ``shutdown_kernel``."""
    import websocket
    from jupyter_client.jsonutil import json_default
    from jupyter_client.session import Session

    kernel = room.call(f"user/{user}/api/kernels", "POST", {"name": "python3"})["id"]
    ws_url = f"{room.url.replace('http', 'ws', 1)}/user/{user}/api/kernels/{kernel}/channels"
    session = Session(username="labkit-bench")
    msg = session.msg(
        "execute_request",
        {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    )
    msg["channel"] = "shell"
    authorization = room.session.headers["Authorization"]  # HubClient sets a str; requests' type allows bytes
    if isinstance(authorization, bytes):
        authorization = authorization.decode()
    socket = websocket.create_connection(ws_url, header=[f"Authorization: {authorization}"], timeout=timeout_s)
    try:
        t0 = time.monotonic()
        socket.send(json.dumps(msg, default=json_default))
        errors = []
        while True:
            reply = json.loads(socket.recv())
            if reply.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]:
                continue
            kind = reply["header"]["msg_type"]
            if kind == "error":
                errors.append(f"{reply['content']['ename']}: {reply['content']['evalue']}")
            if kind == "execute_reply":
                took = time.monotonic() - t0
                break
    except (websocket.WebSocketException, OSError) as exc:
        raise LabKernelError(user=user, code=code, problem="no answer", errors=[str(exc)]) from None
    finally:
        socket.close()
    if errors or reply["content"].get("status") != "ok":
        raise LabKernelError(user=user, code=code, problem="failed", errors=errors or [str(reply["content"])])
    return kernel, took


def lab_memory(container_name: str, client: Any = None) -> int:
    """The memory a lab's container uses, as `docker stats` shows it (usage less the inactive file cache), read
    through ``client`` (default: this machine's engine)."""
    own = client is None
    client = connect() if own else client
    try:
        stats = client.containers.get(container_name).stats(stream=False)["memory_stats"]
    finally:
        if own:
            client.close()
    detail = stats.get("stats", {})
    return int(stats["usage"] - detail.get("inactive_file", detail.get("total_inactive_file", 0)))


def save_notebooks(
    room: HubClient, users: tuple[str, ...], name: str, which: int = 0, note: str = ""
) -> dict[str, float]:
    """Save ``name`` in each lab with its exercise number ``which`` solved (as the participant would: the
    contents API; the board learns of it as of any save), ``note`` added to it; when each was saved."""
    from ..course.catalogue import REGISTRY, exercises_of

    exercise = exercises_of(name)[which]
    saved = {}
    for user in users:
        content = room.call(f"user/{user}/api/contents/{name}?content=1")["content"]
        for cell in content["cells"]:
            if f"exercise:{exercise}" in cell.get("metadata", {}).get("tags", []):
                cell["source"] = REGISTRY[exercise].solution() + note
        room.call(f"user/{user}/api/contents/{name}", "PUT", {"type": "notebook", "format": "json", "content": content})
        saved[user] = time.time()
    return saved


def wait_for_verdicts(room_dir: Path, saved: dict[str, float], name: str, timeout_s: float) -> tuple[list[float], int]:
    """Seconds from each save to the board's verdict on it (progress.json's `checked`), and how many never came."""
    from ..course.catalogue import exercises_of
    from .board import progress

    exercises = exercises_of(name)
    done: dict[str, float] = {}

    def all_judged() -> bool:
        table = progress.load(room_dir)
        for user, t_save in saved.items():
            marks = table.marks.get(user, {})
            checked = [marks[e].checked for e in exercises if e in marks and marks[e].checked > t_save]
            if checked and user not in done:
                done[user] = min(checked) - t_save  # the board's own clock: exact whatever the poll's step
        return len(done) == len(saved)

    try:
        wait_until(all_judged, timeout_s, "the board's verdicts", interval_s=0.5)
    except WaitTimeoutError:
        pass  # reported as saves without a verdict
    return list(done.values()), len(saved) - len(done)


REPORTED = "graders_reported"  # the key of the graders' own reports in a Judging sample


@dataclass(frozen=True)
class Judging:
    """Where a bench reads what judging costs, and how it knows the room is done with a batch of saves. On
    one engine: the room's judging cgroup (its graders and scanner, ended ones included) and the board's
    process; the graders' own reports beside them. On a swarm: the board's process and the graders' reports
    (their cgroups are on the workers), and no warm graders to wait for."""

    meter: CpuMeter
    settings: RoomSettings
    client: Any

    @classmethod
    def of(cls, settings: RoomSettings, client: Any) -> Judging:
        from .hub import processes

        board = processes.find(processes.folder_of(settings.directory), "board")
        cgroups = {}
        if not settings.swarm:
            driver, version = cpu_cost.engine_cgroups(client)
            cgroups["graders"] = cpu_cost.cgroup_dir(cpu_cost.room_cgroup(settings.room_id, driver), version)
        return cls(CpuMeter(cgroups=cgroups, pids={"board": board.pid} if board is not None else {}), settings, client)

    def sample(self) -> dict[str, float]:
        """Each source's core-seconds so far, and the graders' reports (with how many runs gave none)."""
        from .board import progress

        cost = progress.load(self.settings.directory).cost
        return {**self.meter.sample(), REPORTED: cost.cpu_s, "unreported": float(cost.unreported)}

    def since(self, before: dict[str, float]) -> tuple[dict[str, float], float, int]:
        """Core-seconds by source since ``before`` (on a swarm, "graders" is their reports), the graders'
        reported core-seconds and how many runs reported none."""
        now = self.sample()
        cost = {name: round(max(0.0, now[name] - before.get(name, 0.0)), 3) for name in now}
        reported, unreported = cost.pop(REPORTED), int(cost.pop("unreported"))
        if self.settings.swarm:
            cost["graders"] = reported
        return cost, reported, unreported

    def settle(self, timeout_s: float, what: str) -> None:
        """Wait until the room's graders are warm and waiting (on one engine; a swarm's are cold services)."""
        if not self.settings.swarm:
            wait_until(lambda: graders_idle(self.client, self.settings.room_id), timeout_s, what)


def graders_idle(client: Any, room_id: str) -> bool:
    """Every grader container of the room warm and waiting (none judging, none warming up, none leaving)."""
    try:
        graders = client.containers.list(
            all=True, ignore_removed=True, filters={"label": [f"{ROOM_LABEL}={room_id}", f"{ROLE_LABEL}=grader"]}
        )
        for container in graders:
            if container.status != "running":
                return False
            logs = container.logs(tail=20).decode(errors="replace")
            if WARM_MARK not in logs or RESULT_MARK in logs:
                return False
    except ENGINE_ERRORS:  # one being removed as it was asked
        return False
    return bool(graders)


def judged(
    room: HubClient, judging: Judging, users: tuple[str, ...], notebook: str, which: int, timeout_s: float
) -> tuple[list[float], int, tuple[dict[str, float], float, int]]:
    """Save ``notebook`` in ``users``' labs with its exercise number ``which`` solved (where it has none, its
    first again, with a comment added: a change to judge) and wait for the verdicts; their save-to-verdict
    seconds, how many never came, and what they cost (Judging.since) from the saves until the room's graders
    are warm again."""
    from ..course.catalogue import exercises_of

    which, note = (which, "") if which < len(exercises_of(notebook)) else (0, "\n# saved again\n")
    before = judging.sample()
    saved = save_notebooks(room, users, notebook, which, note)
    values, missing = wait_for_verdicts(judging.settings.directory, saved, notebook, timeout_s)
    try:  # the warm-ups those runs started are part of their cost
        judging.settle(300, "the room's graders to be warm again")
    except WaitTimeoutError:
        say("room bench: the graders were not all warm again within 300 s; the CPU figure stops there")
    return values, missing, judging.since(before)


def one_lab(result: RoomBench, room: HubClient, settings: RoomSettings, client: Any, timeout_s: float) -> None:
    """The first participant's lab: its memory idle and with Triton started in a kernel, and that start's time.
    On a swarm the memory is read through the lab's node's engine, or not at all (bench_swarm)."""
    first = settings.participants[0]
    with contextlib.ExitStack() as stack:
        if settings.swarm:
            where = stack.enter_context(lab_on_its_node(client, settings, first))
        else:
            where = (None, f"{settings.prefix}-{first}")
        time.sleep(5)  # a measurement's pause, not a wait: the lab's JupyterLab settles after its first answer
        result.lab_memory_idle = lab_memory(where[1], where[0]) if where else None
        kernel, result.triton_start_s = run_in_lab(room, first, START_CODE, timeout_s)
        time.sleep(5)  # the same pause before the second reading
        result.lab_memory_triton = lab_memory(where[1], where[0]) if where else None
    room.call(f"user/{first}/api/kernels/{kernel}", "DELETE")


def run(
    settings: RoomSettings, *, timeout_s: float = 900, checks_timeout_s: float = 900, notebook: str = SAVED_NOTEBOOK
) -> RoomBench:
    """The bench (see the module's docstring); the room is taken down (work volumes too) however it ends."""
    from .hub import lifecycle

    result = RoomBench(participants=len(settings.participants), notebook=notebook, swarm=settings.swarm)
    try:
        say(f"room bench: room up with {len(settings.participants)} participant(s) in {settings.directory} ...")
        info = lifecycle.up(settings)
        result.up_s = info.seconds
        record = room_record.read(settings.directory)
        room = HubClient(record.url, record.teacher_token)
        say(f"room bench: the hub answered in {info.seconds:.1f} s; starting every lab ...")
        result.ready_s = start_labs(room, settings.participants, timeout_s)
        result.all_ready_s = max(result.ready_s.values())
        first = settings.participants[0]
        say(f"room bench: all labs ready in {result.all_ready_s:.1f} s; labkit.start() in {first}'s lab ...")
        client = connect()
        one_lab(result, room, settings, client, timeout_s)
        judging = Judging.of(settings, client)
        judging.settle(timeout_s, "the room's graders to be warm")
        say(
            f"room bench: saving {notebook} in every lab; waiting for the verdicts (at most {checks_timeout_s:.0f} s) ..."
        )
        values, result.checks_missing, spent = judged(
            room, judging, settings.participants, notebook, 0, checks_timeout_s
        )
        result.cpu_s, result.graders_reported_s, result.graders_unreported = spent
        result.checks[notebook] = values
        result.core_s_per_save = cpu_cost.per_save(result.cpu_s, len(values))
        say(f"room bench: one more save, alone: {first}'s {notebook} ...")
        single, missing, (cost, _, _) = judged(room, judging, (first,), notebook, 1, checks_timeout_s)
        result.single_s, result.single_missing = (single[0] if single else None), bool(missing)
        result.single_core_s = cpu_cost.per_save(cost, len(single))
    finally:
        say("room bench: room down (labs, hub and work volumes) ...")
        lifecycle.down(settings.directory, delete_work=True)
    return result
