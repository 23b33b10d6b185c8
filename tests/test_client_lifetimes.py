"""labkit's tritonclient clients leave nothing for ``sys.unraisablehook`` in a typical session.

tritonclient 2.41's HTTP client closes itself again in ``__del__``; gevent refuses that second close
in another thread than the one that closed it (InvalidThreadUseError, printed to the person as
"Exception ignored in ..."). A client held by an exception's traceback is freed by the cycle
collector, which runs in whatever thread allocates at the time (a gRPC or load thread as well). The
test keeps the collector off while the session runs, then collects in a worker thread while the
main thread, whose gevent hub closed most of the clients, is still alive: the worst case, every time.
"""

from __future__ import annotations

import gc
import os
import sys
import threading

import numpy as np
import pytest

import labkit

GOOD = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}
WRONG_DTYPE = {"INPUT0": np.ones(4, np.int32), "INPUT1": np.ones(4, np.float32)}


@pytest.fixture()
def unraisable(monkeypatch):
    """What reached sys.unraisablehook during the test, as 'ExceptionType in object' lines."""
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(f"{u.exc_type.__name__} in {u.object!r}"))
    return seen


@pytest.fixture()
def collector_off():
    """Cycles wait for the test's own gc.collect() instead of the collector's next run in any thread."""
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


def _session_in(server, kept: list[BaseException]) -> None:
    """What one thread of a notebook does: requests over both protocols, a wrong one kept (as a
    notebook's last error or pytest.raises keeps it), control calls, and a client of its own."""
    for protocol in ("http", "grpc"):
        assert labkit.infer(server, "add_sub", GOOD, protocol=protocol)["OUTPUT0"].tolist() == [2.0] * 4
        with pytest.raises(labkit.RequestError) as info:
            labkit.infer(server, "add_sub", WRONG_DTYPE, protocol=protocol)
        kept.append(info.value)
        client = server.client(protocol)
        assert client.is_model_ready("add_sub")
        client.close()
    assert server.stats("add_sub")["model_stats"] and server.model_config("add_sub")["name"] == "add_sub"
    server.client("http").is_server_live()  # used, never closed: the collector ends it


def _in_threads(fn, count: int) -> None:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures


def test_a_session_leaves_no_unraisable_client_errors(fresh_server, unraisable, collector_off):
    kept: list[BaseException] = []
    _session_in(fresh_server, kept)
    _in_threads(lambda: _session_in(fresh_server, kept), 3)
    for protocol in ("http", "grpc"):
        answers = labkit.client.inference.infer_together(fresh_server, "add_sub", [GOOD] * 3, protocol=protocol)
        assert [a["OUTPUT1"].tolist() for a in answers] == [[0.0] * 4] * 3
        result = labkit.run_load(fresh_server, "add_sub", GOOD, requests=40, concurrency=4, protocol=protocol)
        assert result.count == 40 and not result.errors
    # A worker that outlives the stop and keeps its errors until after it: its own clients go last.
    release, finished = threading.Event(), threading.Event()

    def lingering() -> None:
        mine: list[BaseException] = []
        _session_in(fresh_server, mine)
        finished.set()
        release.wait(60)
        mine.clear()

    worker = threading.Thread(target=lingering)
    worker.start()
    assert finished.wait(60)
    fresh_server.stop()
    kept.clear()
    release.set()
    worker.join(60)
    _in_threads(gc.collect, 1)  # another thread collects while the main thread's gevent hub lives
    gc.collect()
    assert unraisable == []


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_threads_labkit_starts_for_requests_leave_no_descriptors_open(server, protocol):
    """Each thread of infer_together runs its HTTP client on a gevent hub of its own, which keeps two
    descriptors open after the thread ends unless the thread destroys it."""
    labkit.client.inference.infer_together(server, "add_sub", [GOOD] * 3, protocol=protocol)  # first-use setup
    before = _open_descriptors()
    for _ in range(30):
        with pytest.raises(labkit.RequestError):  # a refusal also reads the model's config, on the thread's own client
            labkit.client.inference.infer_together(server, "add_sub", [GOOD, WRONG_DTYPE, GOOD], protocol=protocol)
    assert _open_descriptors() - before < 20  # 30 rounds of 3 threads left 180 open before
