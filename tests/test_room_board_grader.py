"""The room's grader on a real engine: a participant's saved notebook, read from their volume (read-only,
by the room's scanning container), judged in a container with no network that sees only its exercise
cells; solved, wrong, untouched and tampered-with cells; the real-model lesson's, whose models and
their environments the image carries; and the grader's report of its own CPU, which reaches the board."""

from __future__ import annotations

import asyncio
import time

import docker.errors
import pytest
from room_board_support import (
    NOTEBOOK,
    WRONG_BAD_REQUEST,
    RoomVolumes,
    notebook,
    room_engine,
    solution,
)

from labkit.course.catalogue import REGISTRY
from labkit.errors import SubmissionError
from labkit.room import cpu_cost
from labkit.room.board import progress
from labkit.room.board.notebook_sources import VolumeSource
from labkit.room.board.progress import NOT_STARTED, NOT_YET, PASSED, Progress
from labkit.room.board.watch import Board
from labkit.room.grader import runner as grader
from labkit.room.protocol import ROLE_LABEL, ROOM_LABEL, Submission, untouched_results

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def room(grader_image):
    client = room_engine()
    made = RoomVolumes(client, grader_image)
    yield made
    made.close()
    client.close()


@pytest.fixture(scope="module")
def graded(room):
    """p01 solved 01-output2 and tried 01-bad-request (wrongly); p02 saved the notebook as shipped, but with
    the first check cell replaced by a print that claims a pass."""
    room.save("p01", notebook({"01-output2": solution("01-output2"), "01-bad-request": WRONG_BAD_REQUEST}))
    faked = notebook()
    for cell in faked.cells:
        if 'labkit.exercises.check("01-output2"' in cell.source:
            cell.source = 'print("passed: 01-output2")'
    room.save("p02", faked, folder="notebooks")
    room.save("p04", notebook())  # as shipped, saved again: nothing to judge
    source = VolumeSource(room.client, room.id, room.image, {u: room.volume(u) for u in ("p01", "p02", "p03", "p04")})
    judge = grader.Grader(room.client, room.id, room.image)
    found = source.scan()
    try:
        return found, {u: judge.judge(source.read(u, next(iter(found[u])))) for u in ("p01", "p02")}
    finally:
        source.close()


def _by_exercise(judgement: grader.Judgement) -> dict[str, dict]:
    return {r.exercise: r for r in judgement.results}


def test_scan_lists_saved_notebooks_and_creates_no_volume(room, graded):
    found, _ = graded
    assert set(found) == {"p01", "p02", "p04"}  # p03 has no volume yet: skipped, and none was made for them
    assert list(found["p01"]) == [NOTEBOOK] and list(found["p02"]) == [f"notebooks/{NOTEBOOK}"]
    # p04's exercise cells are as shipped (so are p02's: only a check cell changed); p01 wrote two
    assert [
        found[u][n].untouched for u, n in (("p01", NOTEBOOK), ("p02", f"notebooks/{NOTEBOOK}"), ("p04", NOTEBOOK))
    ] == [False, True, True]
    assert {r.exercise: r.started for r in untouched_results(NOTEBOOK)} == {
        "01-bad-request": False,
        "01-output2": False,
    }
    with pytest.raises(docker.errors.NotFound):
        room.client.volumes.get(room.volume("p03"))
    assert not room.client.containers.list(
        all=True, ignore_removed=True, filters={"label": [f"{ROOM_LABEL}={room.id}", f"{ROLE_LABEL}=scan"]}
    )


def test_a_solved_exercise_passes_and_a_wrong_one_is_not_yet_with_its_hint(graded):
    _, judged = graded
    run = judged["p01"]
    assert not run.error and run.network == ["lo"]  # the notebook ran with no network interface but loopback
    verdicts = _by_exercise(run)
    assert verdicts["01-output2"].passed and verdicts["01-output2"].started
    assert not verdicts["01-bad-request"].passed and verdicts["01-bad-request"].started
    assert verdicts["01-bad-request"].problem and verdicts["01-bad-request"].hint
    table = Progress(["p01"])
    table.record("p01", NOTEBOOK, 1.0, run.results)
    assert table.table()["participants"]["p01"]["01-output2"] == PASSED
    assert table.table()["participants"]["p01"]["01-bad-request"] == NOT_YET


def test_the_graders_own_checks_run_not_the_participants_check_cells(graded):
    _, judged = graded
    verdicts = _by_exercise(judged["p02"])
    assert set(verdicts) == {"01-output2", "01-bad-request"}
    assert not any(v.passed or v.started for v in verdicts.values())
    table = Progress(["p02"])
    table.record("p02", f"notebooks/{NOTEBOOK}", 1.0, judged["p02"].results)
    assert set(table.table()["participants"]["p02"].values()) == {NOT_STARTED}


def test_a_run_past_its_time_limit_is_stopped_and_says_so(room):
    room.save("p04", notebook({"01-output2": solution("01-output2")}))
    slow = grader.Grader(room.client, room.id, room.image, grader.Limits(timeout_s=1))
    source = VolumeSource(room.client, room.id, room.image, {"p04": room.volume("p04")})
    try:
        assert not source.scan()["p04"][NOTEBOOK].untouched
        run = slow.judge(source.read("p04", NOTEBOOK))
    finally:
        source.close()
    assert run.error and {r.exercise for r in run.results} == {"01-output2", "01-bad-request"}
    assert not any(r.passed for r in run.results)
    assert not room.client.containers.list(
        all=True, ignore_removed=True, filters={"label": [f"{ROOM_LABEL}={room.id}", f"{ROLE_LABEL}=grader"]}
    )


def test_a_missing_grader_image_is_an_error_verdict_not_a_crash(room):
    submission = Submission("p01", NOTEBOOK, {"01-output2": solution("01-output2")})
    run = grader.Grader(room.client, room.id, "labkit-test/no-such-grader:0").judge(submission)
    assert run.error and not any(r.passed for r in run.results)


def test_the_grader_sees_no_participant_files_and_a_missing_notebook_is_an_error(room):
    """Only the exercise cells reach the grader: a notebook that labkit does not ship is judged as an error
    naming it, and a notebook missing from the volume is a SubmissionError, not a grader run."""
    judge = grader.Grader(room.client, room.id, room.image)
    run = judge.judge(Submission("p01", "99_not_shipped.ipynb", {"01-output2": solution("01-output2")}))
    assert run.error and run.results == []  # no exercise of its own to mark
    source = VolumeSource(room.client, room.id, room.image, {"p01": room.volume("p01")})
    try:
        source.scan()
        with pytest.raises(SubmissionError) as missing:
            source.read("p01", "no_such.ipynb")
        assert (missing.value.problem, missing.value.user) == ("unreachable", "p01")
    finally:
        source.close()


REAL_MODELS = f"{REGISTRY['17-one-request'].notebook}.ipynb"
# started but wrong: batches of 4 crops, so a page of 11 lines takes 3 requests where ocr_rec's 8 take 2
HALF_BATCHES = solution("17-one-request").replace("BATCH = 8", "BATCH = 4")


def test_the_real_model_lesson_is_judged_offline_with_the_models_the_image_carries(room):
    """17-one-request saved solved by p05 and with half-size batches by p06: the grader, with no network,
    serves examples/real_models from the image (their environments built into it) and judges both."""
    assert HALF_BATCHES != solution("17-one-request")
    room.save("p05", notebook({"17-one-request": solution("17-one-request")}, REAL_MODELS), REAL_MODELS)
    room.save("p06", notebook({"17-one-request": HALF_BATCHES}, REAL_MODELS), REAL_MODELS)
    source = VolumeSource(room.client, room.id, room.image, {u: room.volume(u) for u in ("p05", "p06")})
    judge = grader.Grader(room.client, room.id, room.image)
    try:
        found = source.scan()
        runs = {u: judge.judge(source.read(u, REAL_MODELS)) for u in ("p05", "p06")}
    finally:
        source.close()
    for user, run in runs.items():
        assert not run.error and run.network == ["lo"], (user, run.error)
        others = [r for e, r in _by_exercise(run).items() if e != "17-one-request"]
        assert not any(r.started or r.passed for r in others)  # as shipped: not run, not judged
    solved, halved = _by_exercise(runs["p05"])["17-one-request"], _by_exercise(runs["p06"])["17-one-request"]
    assert solved.passed and solved.started, solved
    assert not halved.passed and halved.started and halved.rule == "requests", halved
    assert halved.problem and halved.hint
    assert {u: list(found[u]) for u in found} == {"p05": [REAL_MODELS], "p06": [REAL_MODELS]}


def _graders_left(room) -> list:
    labels = [f"{ROOM_LABEL}={room.id}", f"{ROLE_LABEL}=grader"]
    return room.client.containers.list(all=True, ignore_removed=True, filters={"label": labels})


async def _until_judged(board: Board, room_dir, user: str, limit_s: float) -> None:
    tasks = board.start()
    try:
        deadline = time.monotonic() + limit_s
        while not progress.load(room_dir).marks.get(user) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
    finally:
        board.stop()  # its runs; its watch and dispatch loops are the tasks start() gave
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_a_graders_own_cpu_figure_reaches_the_board_and_matches_its_cgroup(room, tmp_path):
    """The grader reads its container's cgroup as it answers, and the board adds the figure to progress.json
    (what `room bench --swarm` reads, the graders being on other machines). Here the run's container is the only
    one under a cgroup parent of its own, whose counter keeps its CPU after it is removed: the two agree, but
    for what the container spent after its answer (its kernel and Triton stopping)."""
    room.save("p07", notebook({"01-output2": solution("01-output2")}))
    driver, version = cpu_cost.engine_cgroups(room.client)
    parent = cpu_cost.room_cgroup(f"{room.id}c", driver)
    source = VolumeSource(room.client, room.id, room.image, {"p07": room.volume("p07")})
    runner = grader.Grader(
        room.client, room.id, room.image, cgroup_parent=parent
    )  # no warm one: one run, one container
    board = Board(tmp_path, room.id, ["p07"], source, runner, poll_s=0.5, graders=1)
    try:
        asyncio.run(_until_judged(board, tmp_path, "p07", 600))
        assert progress.load(tmp_path).mark("p07", "01-output2").state == progress.PASSED
        deadline = time.monotonic() + 120
        while _graders_left(room) and time.monotonic() < deadline:  # removed in the background after its answer
            time.sleep(0.5)
        assert not _graders_left(room)
        total = cpu_cost.cgroup_cpu_s(cpu_cost.cgroup_dir(parent, version))
    finally:
        board.sweep()  # the scanner, and the grader's cgroup parent
        board.pool.shutdown(wait=False)
    cost = progress.load(tmp_path).cost
    assert (cost.runs, cost.unreported) == (1, 0), cost
    print(f"self-reported {cost.cpu_s:.3f} core-s, cgroup parent {total:.3f} core-s")
    assert 0 < cost.cpu_s <= total
    assert total - cost.cpu_s <= 0.05 * total, (cost.cpu_s, total)  # within a few percent
