"""fill_once's private folders across real processes: one killed outright (SIGKILL skips its cleanup) leaves
its ``<target>.partial-<pid>`` behind, and the next fill sweeps it, while a folder that a live process is still
filling stays until that process is done with it; a folder from before the lock is judged by its PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from labkit.plumbing.downloads import fill_once
from labkit.plumbing.partials import partial_for

FILLER = """
import sys
from pathlib import Path
from labkit.plumbing.downloads import fill_once

def fill(folder):
    (folder / "half").write_text("begun")
    print("filling", flush=True)
    sys.stdin.readline()  # the test says when to go on
    (folder / "made_by").write_text("filler")

fill_once(Path(sys.argv[1]), fill)
print("done", flush=True)
"""


def _filler(target: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", FILLER, str(target)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "filling\n"
    return proc


def _ours(folder: Path) -> None:
    (folder / "made_by").write_text("test")


def _leftovers(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f"{target.name}.partial-"))


def test_a_killed_fillers_folder_is_swept_and_a_live_ones_is_left_alone(tmp_path):
    target = tmp_path / "cache" / "thing"
    killed, live = _filler(target), _filler(target)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        dead_partial, live_partial = partial_for(target, killed.pid), partial_for(target, live.pid)
        assert (dead_partial / "half").is_file() and (live_partial / "half").is_file()  # SIGKILL cleaned nothing

        assert fill_once(target, _ours) == target
        assert (target / "made_by").read_text() == "test"
        assert not dead_partial.exists() and _leftovers(target) == [live_partial.name, f"{live_partial.name}.lock"]
        assert (live_partial / "half").read_text() == "begun"  # untouched while its process fills it

        assert live.stdin is not None and live.stdout is not None
        live.stdin.write("\n")
        live.stdin.flush()
        assert live.stdout.readline() == "done\n"  # it lost the rename; the copy already there stays
        assert live.wait(timeout=30) == 0
    finally:
        for proc in (killed, live):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert _leftovers(target) == [] and (target / "made_by").read_text() == "test"


def test_a_folder_from_before_the_lock_is_judged_by_its_pid(tmp_path):
    target = tmp_path / "thing"
    ended = subprocess.Popen(["true"])
    ended.wait()
    gone, alive = partial_for(target, ended.pid), partial_for(target, os.getppid())
    for folder in (gone, alive):
        (folder / "sub").mkdir(parents=True)
    fill_once(target, _ours)
    assert not gone.exists() and (alive / "sub").is_dir()
    fill_once(target, _ours)  # made already: the sweep still runs, and the live one still stays
    assert _leftovers(target) == [alive.name]


def test_a_fill_that_fails_leaves_nothing_and_the_next_one_succeeds(tmp_path):
    target = tmp_path / "thing"

    def broken(folder: Path) -> None:
        (folder / "half").write_text("begun")
        raise OSError("disk full")

    try:
        fill_once(target, broken)
    except OSError as exc:
        assert str(exc) == "disk full"
    else:
        raise AssertionError("the fill's own error must come out")
    assert not target.exists() and _leftovers(target) == []
    fill_once(target, _ours)
    assert (target / "made_by").read_text() == "test" and _leftovers(target) == []
