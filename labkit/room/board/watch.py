"""The board's watch loop: scan the saved notebooks, queue each new save, judge the queue with the grader
runner, keep the marks (labkit.room.board.progress). The board's web service (labkit.room.board.service) shows them.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ...course.catalogue import hint_of
from ...errors import LabkitError, RoomFileError, SubmissionError
from ..grader.runner import Runner
from ..protocol import RoomVerdict, Submission, duplicated_problem, not_started, untouched_results
from . import copies, progress as progress_store
from .notebook_sources import NotebookSource

log = logging.getLogger("labkit.room.board")
Key = tuple[str, str]  # (participant, notebook path in their work folder)


class Board:
    """The watch loop: scan the ``source``, queue new saves, judge them ``graders`` at a time with the
    ``runner``, keep the marks.

    The queue holds one entry per participant's notebook (a newer save takes the older one's place), and a
    participant has one run at a time. A run past ``slow_s`` (a runaway exercise waits out its check's
    timeouts) frees its grader for the queue, up to ``graders`` such runs. A run that fails for a reason
    outside the participant's code is judged again, ``tries`` times in all, ``retry_s`` apart and doubling,
    then marked "could not judge" until the next save or the teacher's "judge again"."""

    def __init__(
        self,
        room_dir: Path,
        room_id: str,
        participants: list[str],
        source: NotebookSource,
        runner: Runner,
        poll_s: float = 20.0,
        graders: int = 2,
        *,
        tries: int = 3,
        retry_s: float = 2.0,
        slow_s: float = 10.0,
    ) -> None:
        self.room_dir = Path(room_dir)
        self.room_id = room_id
        self.source = source
        self.runner = runner
        self.poll_s = poll_s
        self.graders = max(1, graders)
        self.tries, self.retry_s, self.slow_s = max(1, tries), retry_s, slow_s
        self.progress = progress_store.load(self.room_dir, participants)
        self.waiting: dict[Key, tuple[float, int]] = {}  # (mtime, try), oldest first
        self.running: dict[Key, bool] = {}  # True once past slow_s: it no longer holds a grader
        self.retrying: set[Key] = set()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Future[None]] = set()
        self._warned: set[tuple[Key, float, str]] = set()
        # a thread per grader run (slow ones included), and one for scans and reads
        self.pool = ThreadPoolExecutor(2 * self.graders + 1, thread_name_prefix="board")
        self._scanning = asyncio.Lock()  # one scan at a time: the page's button and the watch loop share it
        self.last_scan_error = ""
        self.prepare_error = ""
        self.prepared = asyncio.Event()  # no grader run before the runner is ready (its image built)
        self._kept: dict[Key, float] = {}  # the mtime of each notebook's copy kept in the room's folder

    @property
    def pending(self) -> int:
        """Saves waiting for a verdict: queued, being judged, or waiting to be judged again."""
        return len(self.waiting) + len(self.running) + len(self.retrying)

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
                key = (user, notebook)
                if key in self.running or key in self.retrying:
                    continue  # its next save is seen once this run ends
                if not self.progress.needs_check(user, notebook, saved.mtime):
                    continue
                if saved.untouched:  # the copy made at the lab's first start: nothing to run
                    self.waiting.pop(key, None)
                    self._record(user, notebook, saved.mtime, untouched_results(notebook))
                    continue
                queued += key not in self.waiting
                earlier, tries = self.waiting.get(key, (saved.mtime, 1))
                self.waiting[key] = (saved.mtime, tries if earlier == saved.mtime else 1)  # takes the older one's place
        self._wake.set()
        if not self.prepared.is_set():
            await self._keep_waiting()
        return queued

    async def _keep_waiting(self) -> None:
        """While the grader is not ready (its image building, or failing), keep copies of the saves waiting
        for it anyway: a participant's work must not depend on the grader (`room rehome` restores them)."""
        loop = asyncio.get_running_loop()
        for (user, notebook), (mtime, _) in list(self.waiting.items()):
            if self._kept.get((user, notebook)) == mtime:
                continue
            try:
                submission = await loop.run_in_executor(self.pool, self.source.read, user, notebook)
            except SubmissionError:
                continue  # read again at the next scan
            self._keep(submission, mtime)

    async def rejudge(self, user: str) -> int:
        """The teacher's "judge again": every saved notebook of ``user``, every exercise in it."""
        self.progress.forget(user)
        self._save()
        return await self.poll_once()

    async def watch(self) -> None:
        """Prepare the runner (build the grader image when missing or outdated: minutes on a vfs engine;
        tried again, less and less often, while it fails), then poll every ``poll_s`` seconds. A source that
        does not run the grader's image (the labs' Jupyter API) is polled meanwhile: its saves are kept."""
        early = None if getattr(self.source, "needs_grader_image", True) else asyncio.ensure_future(self._poll())
        if early is not None:
            self._tasks.add(early)  # stop() ends it
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
        await (early or self._poll())

    async def _poll(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.poll_s)

    async def dispatch(self) -> None:
        """Start runs for the waiting saves, oldest first, each time something changed (a save queued, a run
        ended or turned slow, a retry came due)."""
        await self.prepared.wait()
        while True:
            self._wake.clear()
            self._start_runs()
            await self._wake.wait()

    def _start_runs(self) -> None:
        for key in list(self.waiting):
            if sum(not slow for slow in self.running.values()) >= self.graders:
                return
            if any(user == key[0] for user, _ in self.running):
                continue  # one run per participant at a time
            mtime, tries = self.waiting.pop(key)
            self.running[key] = False
            task = asyncio.ensure_future(self._run(key, mtime, tries))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, key: Key, mtime: float, tries: int) -> None:
        slow = asyncio.get_running_loop().call_later(self.slow_s, self._turned_slow, key)
        try:
            await self._judge(key, mtime, tries)
        except LabkitError as exc:  # not reachable now: read again at the next scan
            self._warn_once(key, mtime, exc)
        finally:
            slow.cancel()
            self.running.pop(key, None)
            self._wake.set()

    def _turned_slow(self, key: Key) -> None:
        if key in self.running and sum(self.running.values()) < self.graders:
            self.running[key] = True
            log.info("%s %s: judged for over %.0f s; the queue goes on beside it", *key, self.slow_s)
            self._wake.set()

    def _warn_once(self, key: Key, mtime: float, exc: LabkitError) -> None:
        said = (key, mtime, getattr(exc, "problem", type(exc).__name__))
        if said not in self._warned:
            self._warned.add(said)
            log.warning("%s %s: %s", *key, exc)

    async def _judge(self, key: Key, mtime: float, tries: int) -> None:
        """Judge the exercise cells of one save that changed since their verdicts; a cell put back to its
        starter is "not started" without a run, an exercise tagged on two cells "not yet" without one, and a
        save that changed nothing keeps its marks."""
        user, notebook = key
        loop = asyncio.get_running_loop()
        try:
            submission = await loop.run_in_executor(self.pool, self.source.read, user, notebook)
        except SubmissionError as exc:
            if exc.problem != "unreadable":
                raise
            if tries == 1:  # Jupyter writes a notebook in place: a read during the write sees part of it
                self._again_later(key, mtime, tries)
                return
            log.warning("%s", exc)  # once: this save is not read again
            self.progress.cannot_read(user, notebook, mtime, str(exc))
            self._save()
            return
        self._keep(submission, mtime)
        starters = [r for r in not_started(notebook, submission.cells) if r.exercise not in submission.duplicated]
        starters += [RoomVerdict(e, problem=duplicated_problem(e), hint=hint_of(e)) for e in submission.duplicated]
        changed = self.progress.changed(user, submission.cells)
        if not changed:
            self._record(user, notebook, mtime, starters)
            return
        judgement = await loop.run_in_executor(self.pool, self.runner.judge, replace(submission, judge=tuple(changed)))
        self.progress.charge(judgement.cpu_s)
        log.info(
            "%s %s (%s) judged in %.1f s%s",
            user,
            notebook,
            ", ".join(changed),
            judgement.seconds,
            f" ({judgement.error}; try {tries} of {self.tries})" if judgement.error else "",
        )
        if judgement.retry and tries < self.tries:
            self._save()  # its cost
            self._again_later(key, mtime, tries)
        elif judgement.retry:
            self.progress.record(user, notebook, mtime, starters)
            why = f"{judgement.error}, {tries} times; the teacher can judge it again from the board."
            self.progress.could_not_judge(user, notebook, mtime, list(changed), why)
            self._save()
        elif judgement.error:  # no digest: the same cells are judged again at the next save
            self._record(user, notebook, mtime, starters + [r for r in judgement.results if r.exercise in changed])
        else:
            verdicts = [replace(r, digest=changed.get(r.exercise, "")) for r in judgement.results]
            self._record(user, notebook, mtime, starters + verdicts)

    def _keep(self, submission: Submission, mtime: float) -> None:
        """The participant's last saved notebook, whole, in the room's folder (`room rehome` restores it); a save
        already kept while it waited for the grader is not written again."""
        if submission.saved and self._kept.get((submission.user, submission.notebook)) != mtime:
            try:
                copies.keep(self.room_dir, submission.user, submission.notebook, submission.saved, mtime)
                self._kept[(submission.user, submission.notebook)] = mtime
            except RoomFileError as exc:
                log.warning("%s", exc)

    def _again_later(self, key: Key, mtime: float, tries: int) -> None:
        self.retrying.add(key)

        def due() -> None:
            self.retrying.discard(key)
            self.waiting.setdefault(key, (mtime, tries + 1))
            self._wake.set()

        asyncio.get_running_loop().call_later(self.retry_s * 2 ** (tries - 1), due)

    def _record(self, user: str, notebook: str, mtime: float, results: list[RoomVerdict]) -> None:
        self.progress.record(user, notebook, mtime, results)
        self._save()

    def _save(self) -> None:
        try:
            progress_store.save(self.room_dir, self.progress)
        except (LabkitError, OSError) as exc:  # the marks stay in memory (the page, the API); say why not on disk
            log.warning("%s", exc)

    def start(self) -> list[asyncio.Future[None]]:
        return [asyncio.ensure_future(self.watch()), asyncio.ensure_future(self.dispatch())]

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def sweep(self) -> None:
        """Stop the source's scanner and remove the room's grader runs still there (the board is stopping)."""
        self.source.close()
        self.runner.close()

    def status(self) -> str:
        """The queue's state in words, as the page shows it."""
        queued = self.pending
        status = f"{queued} notebook(s) waiting for the grader" if queued else "every saved notebook is judged"
        if not self.prepared.is_set():
            status = f"preparing the grader {self.runner.image} (building its image takes minutes, once)"
            if self.prepare_error:
                status = f"the grader {self.runner.image} is not ready; trying again"
        return status
