"""The labkit command: demo, serve and bench, run as a user would run them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from waiting_support import within

import labkit
import labkit.repository

LABKIT = [sys.executable, "-m", "labkit.cli"]


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1)
    except OSError:
        return False
    return True


def test_demo_writes_json(tmp_path):
    out = tmp_path / "demo.json"
    proc = subprocess.run([*LABKIT, "demo", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["server_version"] == "2.41.0"
    assert report["add_sub"]["ok"] is True
    assert report["add_sub"]["http"] and report["add_sub"]["grpc"] and report["add_sub"]["batching_model"]
    assert "all checks passed" in proc.stdout


def test_serve_until_interrupted(tmp_path):
    for name in ("add_sub", "add_sub_batching"):
        labkit.repository.ModelRepository(tmp_path).copy_model_from(labkit.reference_repository(), name)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.pbtxt").write_text('name: "broken"\nbackend: "python"\nmax_batch_sise: 1\n')
    proc = subprocess.Popen(
        [*LABKIT, "serve", str(tmp_path), "--any-ports"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = {}
        for line in proc.stdout:
            key, _, value = line.strip().partition(" ")
            lines[key] = value.strip()
            if key == "log":
                break
        assert lines["http"].startswith("http://127.0.0.1:")
        assert lines["serving"] == "add_sub, add_sub_batching"
        with urllib.request.urlopen(lines["http"] + "/v2/health/ready", timeout=5) as resp:
            assert resp.status == 200
        assert Path(lines["log"]).exists()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert "stopped." in out
        assert "NOT LOADED broken" in err and "max_batch_sise" in err
        assert within(
            lambda: not _answers(lines["http"] + "/v2/health/ready"), 5, "the server to stop answering", interval_s=0.1
        ), "the server still answers after Ctrl-C"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_missing_repository(tmp_path):
    from labkit import cli

    proc = subprocess.run([*LABKIT, "serve", str(tmp_path / "nope")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and proc.stderr.startswith("labkit: ")
    for command in (["serve"], ["export", "b", str(tmp_path / "out"), "--repository"]):
        args = cli.parser().parse_args([*command, str(tmp_path / "nope")])
        with pytest.raises(labkit.errors.RepositoryNotFoundError) as info:  # one error, from one place
            args.func(args)
        assert info.value.path == str(tmp_path / "nope") and not (tmp_path / "out").exists()


def test_exit_codes_are_the_documented_ones(tmp_path):
    """A usage error (argparse) and an error labkit explains exit with different codes, both in --help."""
    from labkit import cli

    usage = subprocess.run([*LABKIT, "serve", "--no-such-option"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == cli.EXIT_USAGE == 2 and "usage:" in usage.stderr
    explained = subprocess.run([*LABKIT, "serve", str(tmp_path / "nope")], capture_output=True, text=True, timeout=60)
    assert explained.returncode == cli.EXIT_LABKIT_ERROR == 3 and explained.stderr.startswith("labkit: ")
    assert len({cli.EXIT_OK, cli.EXIT_NOT_PASSED, cli.EXIT_USAGE, cli.EXIT_LABKIT_ERROR}) == 4
    help_text = subprocess.run([*LABKIT, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "1 a check did not pass" in help_text and "2 a usage error" in help_text and "3 labkit stopped" in help_text


def test_bench_reports_numbers(tmp_path):
    out = tmp_path / "bench.json"
    only = ["--only", "cold_start_s", "--only", "python_reload_s"]  # the load benchmarks take a minute
    proc = subprocess.run([*LABKIT, "bench", *only, "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    assert results.pop("server") == "embedded"
    assert set(results) == {"cold_start_s", "python_reload_s"}
    assert all(isinstance(v, float) and v > 0 for v in results.values())
    assert "python_reload_s" in proc.stdout and "target < 0.5" in proc.stdout  # labkit.cli.benchmark.TARGETS


def test_doctor_says_the_lab_can_run_and_names_what_is_missing():
    ok = subprocess.run([sys.executable, "-m", "labkit.cli", "doctor"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "[ok  ] Triton 23.12 (tritonserver 2.41.0)" in ok.stdout and "the embedded lab can run here" in ok.stdout
    env = {**os.environ, "CXX": "/no/such/g++"}
    broken = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "doctor"], capture_output=True, text=True, timeout=120, env=env
    )
    assert broken.returncode == 1
    line = next(line for line in broken.stdout.splitlines() if "C++ compiler" in line)
    assert line.startswith("[FAIL]") and "/no/such/g++ not found" in line and "apt-get install g++" in line
