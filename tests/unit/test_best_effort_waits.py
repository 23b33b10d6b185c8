"""Best-effort waits go through labkit's one wait helper and end quietly at their limit."""

from __future__ import annotations

import threading
import time

from labkit.server.logs import LogView


def test_settle_returns_once_the_log_is_quiet(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("a line\n")
    started = time.monotonic()
    LogView(log).settle(quiet_s=0.1, limit_s=5.0)
    assert time.monotonic() - started < 2.0


def test_settle_ends_quietly_at_its_limit_while_the_log_grows(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    stop = threading.Event()

    def grow() -> None:
        with open(log, "a") as out:
            while not stop.wait(0.01):
                out.write("more\n")
                out.flush()

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        started = time.monotonic()
        LogView(log).settle(quiet_s=0.5, limit_s=0.4)  # no error: what the log holds now is what there is
        assert 0.35 <= time.monotonic() - started < 2.0
    finally:
        stop.set()
        writer.join()
