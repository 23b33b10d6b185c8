"""labkit.server.idle: waiting until a process has no runnable thread (before an unload)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from waiting_support import within

from labkit.server import idle

# The main thread spins while a second one sleeps (S) throughout: once `spinning` exists, one thread is
# runnable until `done`, with no hand-over of the GIL between them (a thread waiting for the GIL sleeps).
SPINNER = """
import pathlib, sys, threading, time

threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
pathlib.Path(sys.argv[2]).touch()
end = time.monotonic() + 0.5
while time.monotonic() < end:
    pass
pathlib.Path(sys.argv[1]).touch()
time.sleep(60)
"""


def test_wait_idle_returns_once_no_thread_is_runnable(tmp_path):
    done, spinning = tmp_path / "done", tmp_path / "spinning"
    proc = subprocess.Popen([sys.executable, "-c", SPINNER, str(done), str(spinning)])
    try:
        # before `spinning`, the interpreter's start-up may sleep (S) on a busy machine: idle, rightly
        within(lambda: spinning.exists() or proc.poll() is not None, 60, "the spinner to start", interval_s=0.001)
        assert spinning.exists()
        assert idle.wait_idle(Path(f"/proc/{proc.pid}/task"), limit_s=60.0)
        assert done.exists()  # the spinning thread had finished: until then one thread was runnable
        assert idle.busy_threads(Path(f"/proc/{proc.pid}/task")) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_is_gone_has_no_busy_threads(tmp_path):
    assert idle.busy_threads(tmp_path / "no-such-process" / "task") == []
