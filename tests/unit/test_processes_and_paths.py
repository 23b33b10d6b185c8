"""Owner-is-dead checks, container paths, Triton's command line and build-output tidying (no server)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from labkit.docker.mounts import container_path
from labkit.docker.orphans import (
    LABEL_OWNER,
    LABEL_OWNER_START,
    owner_dead,
    owner_labels,
)
from labkit.native.build import _tidy
from labkit.plumbing.owner import UNKNOWN, Owner, process_start


def _ended_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_live_owner_is_not_dead_and_a_gone_one_is():
    me = Owner.me()
    assert me.pid == os.getpid() and me.start not in ("", UNKNOWN) and not me.dead()
    assert Owner(me.host, _ended_pid(), UNKNOWN).dead()


def test_a_reused_pid_is_recognised_by_its_start_time():
    me = Owner.me()
    assert Owner(me.host, me.pid, str(int(me.start) + 1)).dead()  # same pid, another process
    assert not Owner(me.host, me.pid, UNKNOWN).dead()  # no start time recorded: never judged by it


def test_owners_on_other_hosts_are_never_judged():
    assert not Owner(socket.gethostname() + "-elsewhere", _ended_pid()).dead()


def test_container_labels_round_trip_the_owner():
    labels = owner_labels()
    assert labels[LABEL_OWNER] == f"{socket.gethostname()}:{os.getpid()}"
    assert labels[LABEL_OWNER_START] == process_start(os.getpid())
    assert not owner_dead(labels)
    assert owner_dead({LABEL_OWNER: f"{socket.gethostname()}:{_ended_pid()}"})
    assert not owner_dead({LABEL_OWNER: "garbage"})


def test_container_paths_keep_host_paths_unless_they_hide_image_files():
    assert container_path(Path("/tmp/labkit-x/repository"), "/labkit/models") == "/tmp/labkit-x/repository"
    for hidden in ("/usr/local/share/models", "/opt/tritonserver/models", "/", "/labkit/x"):
        assert container_path(Path(hidden), "/labkit/models") == "/labkit/models"
    assert container_path(Path("/usrdata/models"), "/x") == "/usrdata/models"  # only whole path segments


def test_compiler_messages_name_the_users_file_not_the_cache():
    cache_path = "/root/.cache/labkit/builds/minimal/0123abcd/minimal.cc"
    messages = f"{cache_path}:7:45: error: expected ';' before '}}' token\n{cache_path}: In function 'f':\n"
    assert _tidy(messages, cache_path, "minimal") == (
        "minimal.cc:7:45: error: expected ';' before '}' token\nminimal.cc: In function 'f':"
    )
