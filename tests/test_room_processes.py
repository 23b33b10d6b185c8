"""The room's process records (labkit.room.hub.processes): a process started through the record line records
itself and becomes its program under the same pid; `end` stops what the records name and nothing else,
whatever became of a record."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
from waiting_support import eventually

from labkit.room.hub import processes

SLEEP = ["sleep", "300"]


def _start(folder, role: str, command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(processes.command_for(folder.parent, role, command, sys.executable), start_new_session=True)


def test_a_recorded_process_is_its_program_and_ends_by_its_record(tmp_path):
    folder = processes.folder_of(tmp_path)
    proc = _start(folder, "sleeper", SLEEP)
    try:
        record = eventually(lambda: next(iter(processes.read(folder)), None), "the record", 30)
        assert (record.role, record.pid) == ("sleeper", proc.pid)
        found = eventually(lambda: processes.running(record), "the program", 30)
        eventually(lambda: found.cmdline() == SLEEP, "the exec into sleep", 30)  # the same pid, now sleep
        assert processes.find(folder, "sleeper").pid == proc.pid
        assert processes.end(folder) == [f"sleeper (pid {proc.pid})"]
        assert not found.is_running() and processes.read(folder) == []  # ended (and reaped: it was our child)
        assert processes.end(folder) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_record_whose_pid_went_to_another_process_names_nothing(tmp_path):
    """A record of this very test's pid, with another start time: what a crashed room leaves when the pid is
    reused. Nothing is signalled, and the record goes."""
    folder = processes.folder_of(tmp_path)
    folder.mkdir(parents=True)
    me = psutil.Process(os.getpid())
    (folder / "board.json").write_text(json.dumps({"pid": me.pid, "started": me.create_time() - 1000}))
    (folder / "proxy.json").write_text("{half a rec")
    assert processes.running(processes.read(folder)[0]) is None
    assert processes.end(folder) == [] and list(folder.iterdir()) == []
    assert me.is_running()


def test_a_process_that_ignores_sigterm_is_killed(tmp_path):
    folder = processes.folder_of(tmp_path)
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(300)"
    proc = subprocess.Popen(
        processes.command_for(tmp_path, "stubborn", [sys.executable, "-c", stubborn], sys.executable),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"  # SIGTERM is ignored from here on
        process = psutil.Process(proc.pid)
        assert processes.end(folder, timeout_s=0.5) == [f"stubborn (pid {proc.pid})"]
        assert not process.is_running()  # SIGTERM alone would have left it
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_end_picks_roles(tmp_path):
    folder = processes.folder_of(tmp_path)
    one, two = _start(folder, "one", SLEEP), _start(folder, "two", SLEEP)
    try:
        eventually(lambda: len(processes.read(folder)) == 2, "both records", 30)
        assert processes.end(folder, roles=("two",)) == [f"two (pid {two.pid})"]
        assert [r.role for r in processes.read(folder)] == ["one"] and one.poll() is None
    finally:
        for proc in (one, two):
            proc.kill()
            proc.wait()
