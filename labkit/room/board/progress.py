"""The room's progress: participants × exercises, each passed, not yet or not started, with its hint.

Kept in ``<room dir>/progress.json`` (written atomically: a reader never sees half a file), fed by the
board's grader runs and read by the board's page, its API and ``labkit room grades``. It also keeps what the
judging cost (``Cost``: the core-seconds the grader runs reported of themselves, wherever they ran), which
``labkit room bench`` reads.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ...course.catalogue import REGISTRY, hint_of, is_started
from ...errors import BoardError, HubError, RoomFileError
from .. import record as room_record
from ..hubclient import HubClient
from ..protocol import RoomVerdict

PASSED, NOT_YET, NOT_STARTED = "passed", "not yet", "not started"
# Marks that are no verdict on the participant's code: the grader failed (its container killed, the engine's
# error, its own time limit) on every try; the notebook saved last is not one that can be read.
COULD_NOT_JUDGE, UNREADABLE = "could not judge", "unreadable"
STATES = (PASSED, NOT_YET, NOT_STARTED, COULD_NOT_JUDGE, UNREADABLE)
FILE_NAME = "progress.json"


@dataclass(frozen=True)
class Mark:
    """One participant's state on one exercise: ``problem`` and ``hint`` say what to do when not passed;
    ``checked`` is when the grader judged it (Unix time), 0 when never; ``digest``: of the cell it judged
    (a save that leaves the cell as it was is not judged again)."""

    state: str = NOT_STARTED
    problem: str = ""
    hint: str = ""
    checked: float = 0.0
    digest: str = ""


def label(mark: Mark) -> str:
    """A mark's state in words, as the board shows it ("unreadable since 14:03")."""
    if mark.state == UNREADABLE:
        return f"{UNREADABLE} since {time.strftime('%H:%M', time.localtime(mark.checked))}"
    return mark.state


def digest_of(source: str) -> str:
    return hashlib.sha256(source.strip().encode()).hexdigest()[:16]


def exercise_ids() -> list[str]:
    """Every exercise of the workshop, in the notebooks' order."""
    return sorted(REGISTRY, key=lambda e: (REGISTRY[e].notebook, e))


def mark_of(verdict: RoomVerdict, checked: float) -> Mark:
    """A grader's verdict on one exercise as a Mark: an exercise whose cell is still the starter is not
    started, whatever its check said about the starter."""
    known = REGISTRY.get(verdict.exercise)
    hint = verdict.hint or (known.hint if known else "")
    if not verdict.started:
        return Mark(NOT_STARTED, "", hint, checked)
    if verdict.passed:
        return Mark(PASSED, "", "", checked, verdict.digest)
    return Mark(NOT_YET, verdict.problem, hint, checked, verdict.digest)


@dataclass
class Cost:
    """The grader runs' own CPU (each read its container's cgroup as it answered: warm-up and judging), summed
    since the room began: ``cpu_s`` core-seconds over ``runs`` runs that reported one (retried runs included:
    they cost too); ``unreported``: the runs that gave no figure (a run killed, an older grader image)."""

    cpu_s: float = 0.0
    runs: int = 0
    unreported: int = 0


@dataclass
class Progress:
    """The table, and which saved notebook (by mtime) each participant's marks come from; ``unreadable``:
    the notebooks whose last save is not a notebook, since when and why (their marks are kept underneath)."""

    participants: list[str]
    marks: dict[str, dict[str, Mark]] = field(default_factory=dict)
    judged: dict[str, dict[str, float]] = field(default_factory=dict)  # user -> notebook path -> mtime judged
    unreadable: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)  # user -> path -> (since, why)
    cost: Cost = field(default_factory=Cost)

    def charge(self, cpu_s: float | None) -> None:
        """Add one grader run's self-reported core-seconds (None: it reported none) to ``cost``."""
        if cpu_s is None:
            self.cost.unreported += 1
        else:
            self.cost.cpu_s = round(self.cost.cpu_s + cpu_s, 3)
            self.cost.runs += 1

    def _kept(self, user: str, exercise: str) -> Mark:
        return self.marks.get(user, {}).get(exercise, Mark(hint=hint_of(exercise)))

    def mark(self, user: str, exercise: str) -> Mark:
        """What the board shows: the exercise's mark, or "unreadable" while its notebook's last save is not
        a notebook (saying since when, and the mark it had)."""
        kept = self._kept(user, exercise)
        known = REGISTRY.get(exercise)
        for notebook, (since, why) in sorted(self.unreadable.get(user, {}).items()):
            if known is not None and Path(notebook).stem == known.notebook:
                return Mark(UNREADABLE, f"{why} Its mark before: {kept.state}.", "", since, kept.digest)
        return kept

    def needs_check(self, user: str, notebook: str, mtime: float) -> bool:
        """Whether this saved version of the notebook has not been judged yet."""
        return self.judged.get(user, {}).get(notebook) != mtime

    def changed(self, user: str, cells: dict[str, str]) -> dict[str, str]:
        """``{exercise: digest}`` of the started exercise ``cells`` whose source differs from the one their
        mark was judged on."""
        digests = {e: digest_of(source) for e, source in cells.items() if is_started(e, source)}
        return {e: d for e, d in digests.items() if self._kept(user, e).digest != d}

    def record(
        self, user: str, notebook: str, mtime: float, results: list[RoomVerdict], checked: float | None = None
    ) -> None:
        """Store a grader run's verdicts for ``user``'s ``notebook`` saved at ``mtime``."""
        now = time.time() if checked is None else checked
        if user not in self.participants:
            self.participants.append(user)
        row = self.marks.setdefault(user, {})
        for verdict in results:
            row[verdict.exercise] = mark_of(verdict, now)
        self.judged.setdefault(user, {})[notebook] = mtime
        self.unreadable.get(user, {}).pop(notebook, None)

    def could_not_judge(self, user: str, notebook: str, mtime: float, exercises: list[str], why: str) -> None:
        """The grader failed on every try for ``exercises`` of this save: marked so (no digest: the next save,
        or the teacher's "judge again", judges them)."""
        now = time.time()
        row = self.marks.setdefault(user, {})
        for exercise in exercises:
            row[exercise] = Mark(COULD_NOT_JUDGE, why, "the teacher can judge it again from the board", now)
        self.judged.setdefault(user, {})[notebook] = mtime

    def cannot_read(self, user: str, notebook: str, mtime: float, why: str) -> None:
        """This save of ``notebook`` is not a notebook: its exercises show "unreadable" (since the first such
        save) until a readable save; this save is not read again."""
        self.judged.setdefault(user, {})[notebook] = mtime
        broken = self.unreadable.setdefault(user, {})
        broken[notebook] = (broken[notebook][0] if notebook in broken else time.time(), why)

    def forget(self, user: str) -> None:
        """The teacher's "judge again": every saved notebook of ``user`` is judged again, every exercise run
        (their marks stay shown until the new verdicts replace them)."""
        self.judged.pop(user, None)
        self.unreadable.pop(user, None)
        self.marks[user] = {e: replace(m, digest="") for e, m in self.marks.get(user, {}).items()}

    def table(self) -> dict[str, dict[str, dict[str, str]]]:
        """``{"participants": {"p01": {"01-bad-request": "passed", ...}, ...}}``: every participant, every exercise."""
        ids = exercise_ids()
        return {"participants": {u: {e: self.mark(u, e).state for e in ids} for u in self.participants}}

    def to_json(self) -> dict[str, Any]:
        return {
            "participants": list(self.participants),
            "marks": {u: {e: asdict(m) for e, m in row.items()} for u, row in self.marks.items()},
            "judged": self.judged,
            "unreadable": self.unreadable,
            "cost": asdict(self.cost),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Progress:
        marks = {u: {e: Mark(**m) for e, m in row.items()} for u, row in data.get("marks", {}).items()}
        return cls(
            list(data.get("participants", [])),
            marks,
            {u: {n: float(t) for n, t in row.items()} for u, row in data.get("judged", {}).items()},
            {u: {n: (float(w[0]), str(w[1])) for n, w in row.items()} for u, row in data.get("unreadable", {}).items()},
            Cost(**data.get("cost", {})),
        )


def progress_file(room_dir: Path) -> Path:
    return Path(room_dir) / FILE_NAME


def load(room_dir: Path, participants: list[str] | tuple[str, ...] = ()) -> Progress:
    """The room's progress (an empty table for ``participants`` when nothing was judged yet)."""
    path = progress_file(room_dir)
    try:
        progress = Progress.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        progress = Progress([])
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise RoomFileError(path=str(path), problem="unreadable", detail=str(exc)) from None
    progress.participants += [p for p in participants if p not in progress.participants]
    return progress


def save(room_dir: Path, progress: Progress) -> Path:
    """Write progress.json atomically (a temporary file in the same folder, then a rename)."""
    path = progress_file(room_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".progress-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(progress.to_json(), handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def to_csv(progress: Progress | dict[str, Any]) -> str:
    """The table (a Progress, or the board's ``api/progress``) as CSV: a header ``participant,<exercise>...``,
    then one row per participant."""
    table = progress.table() if isinstance(progress, Progress) else progress
    ids = exercise_ids()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["participant", *ids])
    for user, row in table["participants"].items():
        writer.writerow([user, *(row.get(e, NOT_STARTED) for e in ids)])
    return out.getvalue()


def board_table(url: str, token: str, timeout_s: float = 60) -> dict[str, Any]:
    """The board's ``api/progress`` of the room at ``url`` (the hub's address), asked with the teacher's token."""
    client = HubClient(url, token, timeout_s)
    api = f"{client.url}/services/board/api/progress"
    try:
        table = client.call(api)
    except HubError as exc:
        why = {
            0: "no answer: check --url (the room's address)",
            302: "the token is not the teacher's",
            401: "the token is not the teacher's",
            403: "the token is not the teacher's",
        }.get(exc.status_code, "is the board running?")
        raise BoardError(
            problem=f"answered {exc.status_code or 'nothing'}",
            detail=why,
            remedy="Give the teacher's API token (--token)",
            url=api,
            status_code=exc.status_code,
        ) from None
    finally:
        client.close()
    if not isinstance(table, dict) or not isinstance(table.get("participants"), dict):
        raise BoardError(url=api, status_code=200, problem="did not answer the board's table", remedy="check --url")
    return table


def export_grades(room_dir: Path, csv_file: Path | None = None, *, url: str = "", token: str = "") -> int:
    """`labkit room grades`: the table as CSV, into ``csv_file`` or on stdout; from the board at ``url``
    (with the teacher's ``token``) when given, else from ``room_dir``."""
    if url:
        return _write(to_csv(board_table(url, token)), csv_file)
    if not Path(room_dir).is_dir():
        raise RoomFileError(path=str(room_dir), problem="no room")
    record = room_record.read_if_any(Path(room_dir))
    participants = list(record.participants) if record else []
    return _write(to_csv(load(room_dir, participants)), csv_file)


def _write(text: str, csv_file: Path | None) -> int:
    if csv_file is None:
        print(text, end="")
        return 0
    try:
        Path(csv_file).write_text(text)
    except OSError as exc:
        raise RoomFileError(path=str(csv_file), problem="unwritable", detail=exc.strerror or str(exc)) from None
    print(f"{csv_file}: {text.count(chr(10)) - 1} participant(s) × {len(exercise_ids())} exercise(s)")
    return 0
