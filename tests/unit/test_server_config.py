"""The server's parts that are pure values: its config and Triton's command line rendered from it,
where it answers, and the one wait loop."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import socket
import tempfile
from pathlib import Path

import pytest

import labkit
import labkit.errors
import labkit.server
from labkit.cli import serve
from labkit.errors import OptionError, WaitTimeoutError
from labkit.plumbing.endpoints import Endpoints
from labkit.plumbing.polling import wait_until
from labkit.server.server_config import ServerConfig, TritonPlace, argv


def test_triton_command_line_from_one_options_object():
    config = ServerConfig(shm_prefix="labkit_1_1_")
    line = argv(config, TritonPlace("/repo", "/backends", "127.0.0.1", 1, 2, 3), "/bin/tritonserver")
    assert line[0] == "/bin/tritonserver"
    for option in (
        "--model-repository=/repo",
        "--backend-directory=/backends",
        "--model-control-mode=explicit",
        "--disable-auto-complete-config",
        "--http-address=127.0.0.1",
        "--grpc-port=2",
        "--metrics-port=3",
        "--backend-config=python,shm-region-prefix-name=labkit_1_1_",
        "--allow-gpu-metrics=false",
        "--exit-timeout-secs=5",
        "--strict-readiness=true",
    ):
        assert option in line
    full = argv(
        ServerConfig(shm_prefix="p_", auto_complete=True, log_verbose=2, extra_args=["--x=1"]),
        TritonPlace("/r", "/b", "0.0.0.0", 8000, 8001, 8002, gpu_metrics=True),
    )
    assert "--disable-auto-complete-config" not in full and "--allow-gpu-metrics=true" in full
    assert full[-1] == "--x=1" and "--log-verbose=2" in full and full[0] == "tritonserver"


def test_the_python_backends_shared_memory_options_go_to_backend_config():
    config = ServerConfig(
        shm_prefix="p_", shm_default_byte_size=4 << 20, shm_growth_byte_size=2 << 20, stub_timeout_s=45
    )
    line = argv(config, TritonPlace("/r", "/b", "127.0.0.1", 1, 2, 3))
    assert [a for a in line if a.startswith("--backend-config=python,")] == [
        "--backend-config=python,shm-region-prefix-name=p_",
        "--backend-config=python,shm-default-byte-size=4194304",
        "--backend-config=python,shm-growth-byte-size=2097152",
        "--backend-config=python,stub-timeout-seconds=45",
    ]
    assert ServerConfig(shm_prefix="p_").python_backend_config == {"shm-region-prefix-name": "p_"}  # Triton's defaults
    for bad in (0, -1, 1.5, True, "1m"):
        with pytest.raises(OptionError) as refused:
            ServerConfig(shm_default_byte_size=bad)  # type: ignore[arg-type]
        assert (refused.value.option, refused.value.value) == ("shm-default-byte-size", bad)


def test_rendering_is_pure_and_the_config_frozen():
    config = ServerConfig(extra_args=["--a=1"])
    place = TritonPlace("/r", "/b", "127.0.0.1", 1, 2, 3)
    assert argv(config, place) == argv(config, place)
    assert config.extra_args == ("--a=1",)  # a tuple: the caller's list cannot change it later
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.load_timeout_s = 1  # type: ignore[misc]
    changed = config.with_(load_timeout_s=2, exit_timeout_s=9)
    assert (changed.load_timeout_s, config.load_timeout_s) == (2, 120.0)
    assert "--exit-timeout-secs=9" in argv(changed, place) and changed.shm_prefix == config.shm_prefix


def test_every_server_gets_its_own_shared_memory_prefix():
    assert ServerConfig().shm_prefix != ServerConfig().shm_prefix


def test_options_split_between_config_and_runtime():
    config, rest = ServerConfig.split({"load_timeout_s": 3, "image": "x", "env": {"A": "1"}, "auto_complete": True})
    assert (config.load_timeout_s, config.auto_complete) == (3, True)
    assert rest == {"image": "x", "env": {"A": "1"}}


def test_endpoints():
    where = Endpoints("127.0.0.1", 8000, 8001, 8002)
    assert (where.http_url, where.grpc_url, where.metrics_url) == (
        "127.0.0.1:8000",
        "127.0.0.1:8001",
        "http://127.0.0.1:8002/metrics",
    )
    assert where.urls() == {
        "http": "http://127.0.0.1:8000",
        "grpc": "grpc://127.0.0.1:8001",
        "metrics": "http://127.0.0.1:8002/metrics",
    }


def test_wait_until_returns_the_first_true_value_or_names_what_it_waited_for():
    count = itertools.count()
    assert wait_until(lambda: next(count) >= 3 and "done", 5.0, "three asks", interval_s=0.001) == "done"
    with pytest.raises(WaitTimeoutError) as caught:
        wait_until(lambda: False, 0.05, "the impossible", interval_s=0.01)
    assert (caught.value.what, caught.value.timeout_s) == ("the impossible", 0.05)

    def broken() -> bool:
        raise KeyError("ends the wait")

    with pytest.raises(KeyError):
        wait_until(broken, 5.0, "a predicate that raises")


def test_ports_asked_for_are_config_options_and_zero_means_a_free_one():
    assert ServerConfig().ports == {"http": 0, "grpc": 0, "metrics": 0}
    config = ServerConfig(http_port=8000, grpc_port=8001, metrics_port=8002)
    assert config.ports == {"http": 8000, "grpc": 8001, "metrics": 8002}
    for bad in ({"http_port": -1}, {"grpc_port": 70000}, {"http_port": 9000, "metrics_port": 9000}):
        with pytest.raises(ValueError):
            ServerConfig(**bad)
    config, rest = ServerConfig.split({"http_port": 8000, "backend_directory": Path("/b"), "image": "x"})
    assert (config.http_port, config.backend_directory, rest) == (8000, "/b", {"image": "x"})


def test_ports_claimed_fixed_ones_kept_free_ones_picked_and_a_taken_one_refused():
    from labkit.plumbing.ports import claim_ports, free_ports

    wanted = free_ports(1)[0]
    got = claim_ports({"http": wanted, "grpc": 0, "metrics": 0})
    assert got["http"] == wanted and len(set(got.values())) == 3 and all(got.values())
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with pytest.raises(labkit.errors.PortTakenError) as caught:
            claim_ports({"http": 0, "grpc": taken, "metrics": 0})
    assert isinstance(caught.value, labkit.errors.ServerStartError)
    assert (caught.value.port, caught.value.service, caught.value.host) == (taken, "grpc", "127.0.0.1")


def test_serve_asks_for_tritons_ports_unless_any_ports():
    def options(*argv):
        args = argparse.Namespace(
            http_port=None, grpc_port=None, metrics_port=None, any_ports=False, backend_directory=None
        )
        for key, value in zip(argv[::2], argv[1::2]):
            setattr(args, key, value)
        return serve.serve_options(args, [])

    assert options() == {
        "http_port": 8000,
        "grpc_port": 8001,
        "metrics_port": 8002,
        "auto_complete": False,
        "backend_directory": None,
    }
    assert [options("any_ports", True)[k] for k in ("http_port", "grpc_port", "metrics_port")] == [0, 0, 0]
    chosen = options("any_ports", True, "grpc_port", 9001, "backend_directory", "/b")
    assert (chosen["http_port"], chosen["grpc_port"], chosen["backend_directory"]) == (0, 9001, "/b")
    assert (
        serve.serve_options(
            argparse.Namespace(http_port=1, grpc_port=2, metrics_port=3, any_ports=False, backend_directory=None), ["m"]
        )["auto_complete"]
        is True
    )
    with pytest.raises(labkit.LabkitError):
        options("http_port", 8001)  # the same as the grpc default


def test_serve_takes_tritons_backend_config_settings():
    named = serve.backend_config_options(
        [
            "python,shm-default-byte-size=2097152",
            "python,stub-timeout-seconds=60",
            "onnxruntime,enable-global-threadpool=1",
        ]
    )
    assert named == {
        "shm_default_byte_size": 2097152,
        "stub_timeout_s": 60,
        "extra_args": ("--backend-config=onnxruntime,enable-global-threadpool=1",),
    }
    assert (
        argv(ServerConfig(**named), TritonPlace("/r", "/b", "127.0.0.1", 1, 2, 3), "/bin/tritonserver")[-1]
        == "--backend-config=onnxruntime,enable-global-threadpool=1"
    )
    for bad, option in (
        ("python", "--backend-config"),
        ("python,shm-default-byte-size=1M", "--backend-config=python,shm-default-byte-size"),
        ("python,shm-region-prefix-name=mine", "--backend-config"),  # labkit's own: two servers never share one
    ):
        with pytest.raises(labkit.errors.OptionError) as caught:
            serve.backend_config_options([bad])
        assert (caught.value.option, caught.value.value) == (option, bad if option == "--backend-config" else "1M")


def test_user_backends_are_linked_by_name_never_written_and_python_refused(tmp_path):
    from labkit.server import user_backends

    mine, ours = tmp_path / "mine", tmp_path / "work" / "backends"
    (mine / "minimal").mkdir(parents=True)
    (mine / "minimal" / "libtriton_minimal.so").write_bytes(b"x")
    (ours / "python").mkdir(parents=True)
    (ours / "notebook_backend").mkdir()  # written from a notebook: kept, and a clash
    before = sorted(str(p) for p in mine.rglob("*"))
    assert user_backends.link(ours, mine) == ["minimal"]
    assert (ours / "minimal" / "libtriton_minimal.so").is_symlink()
    assert (ours / "minimal" / "libtriton_minimal.so").read_bytes() == b"x"
    (ours / "minimal" / "__pycache__").mkdir()  # what Triton writes beside a backend lands in labkit's folder
    assert user_backends.link(ours, mine, seen_as="/inside") == ["minimal"]  # a relaunch replaces its links
    assert str((ours / "minimal" / "libtriton_minimal.so").readlink()) == "/inside/minimal/libtriton_minimal.so"
    assert user_backends.link(ours, None) == [] and not (ours / "minimal").exists()
    (mine / "python").mkdir()
    with pytest.raises(labkit.errors.BackendClashError) as caught:
        user_backends.link(ours, mine)
    assert (caught.value.backend, caught.value.directory) == ("python", str(mine.resolve()))
    assert sorted(str(p) for p in mine.rglob("*")) == before + [str(mine / "python")]
    (mine / "python").rmdir()
    (mine / "notebook_backend").mkdir()
    with pytest.raises(labkit.errors.BackendClashError) as caught:
        user_backends.link(ours, mine)
    assert caught.value.backend == "notebook_backend" and (ours / "notebook_backend").is_dir()
    with pytest.raises(labkit.errors.SetupError) as missing:
        user_backends.link(ours, tmp_path / "nope")
    assert missing.value.missing == str(tmp_path / "nope")


def test_a_stopped_serve_keeps_its_log_and_nothing_else(tmp_path, monkeypatch):
    from labkit.server.runtime import Workspace

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    space = Workspace.create("embedded", tmp_path / "repo", None)
    space.logs.path.write_text("I1125 model said hello\n")
    (space.backend_dir / "python").mkdir(parents=True)
    space.remove(keep_log=True)
    assert space.logs.path.read_text() == "I1125 model said hello\n"
    assert sorted(p.name for p in space.workdir.iterdir()) == ["logs"]
    space.remove()
    assert not space.workdir.exists()


def test_the_log_follower_hands_on_new_lines_without_cpu_noise(tmp_path):
    from labkit.server.logs import LogFollower, LogView

    log = tmp_path / "t.log"
    log.write_text("before\n")
    seen = []
    follower = LogFollower(LogView(log), seen.append)
    with open(log, "a") as out:
        out.write("W Failed to initialize NVML\nhello from model.py\npart")
    follower.pump()
    assert seen == ["hello from model.py"]
    with open(log, "a") as out:
        out.write("ial line\nlast")
    follower.pump()
    follower.stop()  # never started: stop() still writes what is left
    assert seen == ["hello from model.py", "partial line", "last"]
