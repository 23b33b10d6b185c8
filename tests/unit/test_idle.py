"""labkit.server.idle: waiting until a process has no runnable thread (before an unload)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from labkit.server import idle

SPINNER = """
import pathlib, sys, threading, time

def spin():
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        pass
    pathlib.Path(sys.argv[1]).touch()

worker = threading.Thread(target=spin)
worker.start()
worker.join()
time.sleep(60)
"""


def test_wait_idle_returns_once_no_thread_is_runnable(tmp_path):
    done = tmp_path / "done"
    proc = subprocess.Popen([sys.executable, "-c", SPINNER, str(done)])
    try:
        assert idle.wait_idle(Path(f"/proc/{proc.pid}/task"), limit_s=60.0)
        assert done.exists()  # the spinning thread had finished: until then one thread was runnable
        assert idle.busy_threads(Path(f"/proc/{proc.pid}/task")) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_is_gone_has_no_busy_threads(tmp_path):
    assert idle.busy_threads(tmp_path / "no-such-process" / "task") == []
