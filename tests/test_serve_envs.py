"""The environments `labkit serve` builds from a model's requirements.txt (issue 48): a serve killed outright
mid-build leaves a half-built folder that the next build sweeps before it succeeds; models whose lists name
the same packages share one environment, built and announced once; and the Docker server serves such models
with environments built for the image's stub, mounted read-only, without writing into the person's folder."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from serve_support import LABKIT, Serve, listing
from waiting_support import eventually

import labkit
from labkit.lessons import real_models
from labkit.python_envs import model_envs

pytestmark = pytest.mark.slow

CONFIG = """backend: "python"
max_batch_size: 0
input { name: "X" data_type: TYPE_FP32 dims: [ 2 ] }
output { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }
"""
COW = """import errno
import os
import sys

import cowsay
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        print("cowsay from", cowsay.__file__, flush=True)
        try:
            open(os.path.join(sys.prefix, "labkit-probe"), "w").close()
            print("environment writable", flush=True)
        except OSError as exc:
            print("environment not writable:", errno.errorcode[exc.errno], flush=True)

    def execute(self, requests):
        said = len(cowsay.get_output_string("cow", "hi"))
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2 + said)]
            )
            for r in requests
        ]
"""
X = np.array([1.0, 2.0], np.float32)


def _repository(root: Path, **requirements: str) -> Path:
    """A repository with one cow model per entry of ``requirements`` (its requirements.txt; "" for none)."""
    for name, text in requirements.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(CONFIG)
        (root / name / "1" / "model.py").write_text(COW)
        if text:
            (root / name / "requirements.txt").write_text(text)
    return root


def _writers_of(folder: Path) -> list[str]:
    """The processes whose command line names ``folder`` (pip installing into it)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(folder) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(proc.name)
        except OSError:
            continue
    return found


def test_a_serve_killed_mid_build_leaves_a_folder_that_the_next_build_sweeps(tmp_path, monkeypatch):
    cache = tmp_path / "cache"  # a cache of its own: the build must really happen
    repo = _repository(
        tmp_path / "repo",
        cow="cowsay==6.1\n",
        cow_again="# the same list, said differently\ncowsay==6.1  # pinned\n",
        bare="",
    )
    serve = subprocess.Popen(
        [*LABKIT, "serve", str(repo), "--any-ports"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
    )
    said = []
    try:
        assert serve.stderr is not None
        for line in serve.stderr:
            said.append(line)
            if line.startswith("  pip: "):  # pip is installing into the half-built folder
                break
        serve.send_signal(signal.SIGKILL)
        serve.wait(timeout=30)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert said and said[-1].startswith("  pip: "), "".join(said)
    envs_folder = cache / "labkit" / "python-envs"
    left = [p for p in envs_folder.iterdir() if p.name.endswith(f".partial-{serve.pid}")]
    assert len(left) == 1 and (left[0] / "venv").is_dir()  # SIGKILL ran no cleanup
    eventually(lambda: not _writers_of(left[0]), "pip to die with the serve that started it", 30)

    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    lines: list[str] = []
    envs = model_envs.envs_for(repo, progress=lines.append)
    assert not left[0].exists() and not [p for p in envs_folder.iterdir() if ".partial-" in p.name]
    assert sorted(envs) == ["cow", "cow_again"] and envs["cow"] == envs["cow_again"]
    assert (envs["cow"] / "lib" / "python3.11" / "site-packages" / "cowsay").is_dir()
    assert [line for line in lines if line.startswith("environment of")] == [
        f"environment of cow, cow_again: 1 package from {repo / 'cow' / 'requirements.txt'}"
    ]
    assert sum(line.startswith("creating a Python") for line in lines) == 1  # one build for both

    again: list[str] = []
    assert model_envs.envs_for(repo, progress=again.append) == envs
    assert again == [lines[0]]  # built before: said once, nothing built or unpacked


def test_labkit_serve_in_docker_serves_a_model_with_its_own_packages(cpu_image, tmp_path):
    repo = _repository(tmp_path / "repo", cow="cowsay==6.1\n")
    before = listing(repo)
    serve = Serve(str(repo), "--any-ports", "--server", "docker", "--image", cpu_image)
    try:
        assert serve.lines["serving"] == "cow"
        env = serve.lines["env"].removeprefix("cow: ")
        assert Path(env).is_dir() and repo not in Path(env).parents
        client = httpclient.InferenceServerClient(serve.lines["http"].removeprefix("http://"))
        config = client.get_model_config("cow")
        assert config["parameters"]["EXECUTION_ENV_PATH"]["string_value"] == env  # mounted at its own path
        tensor = httpclient.InferInput("X", [2], "FP32")
        tensor.set_data_from_numpy(X)
        answer = client.infer("cow", [tensor]).as_numpy("Y")
        client.close()
        said = answer[0] - 2 * X[0]
        assert said > 0 and answer.tolist() == (X * 2 + said).tolist()  # cowsay drew its cow in the container
        serve.wait_for("environment not writable: EROFS")  # read-only: no model can change a shared environment
        serve.wait_for(f"cowsay from {env}/lib/python3.11/site-packages/cowsay/")
        assert serve.stop(signal.SIGINT).strip().endswith("stopped.")
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert serve.proc.returncode == 0
    assert {k: v for k, v in listing(repo).items() if "__pycache__" not in k} == before


def test_a_docker_image_whose_python_labkit_does_not_know_is_refused_before_anything_starts(tmp_path):
    repo = _repository(tmp_path / "repo", cow="cowsay==6.1\n")
    done = subprocess.run(
        [*LABKIT, "serve", str(repo), "--any-ports", "--server", "docker", "--image", "example.org/triton:custom"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3 and "PythonEnvError" not in done.stdout and "Traceback" not in done.stderr
    assert "example.org/triton:custom" in done.stderr and "labkit python-env" in done.stderr
    assert "http" not in done.stdout
    assert sorted(p.name for p in (repo / "cow").iterdir()) == ["1", "config.pbtxt", "requirements.txt"]
    # What the refusal advises: an environment built for the Python the person names, under the image's /usr.
    env = labkit.python_env(
        tmp_path / "env", ["cowsay==6.1"], runtime="docker", image="example.org/triton:custom", python="3.11"
    )
    assert (env.path / "bin" / "python3.11").readlink() == Path("/usr/bin/python3.11") and env.python == "3.11"


def test_a_model_whose_config_names_its_own_environment_gets_none_built(tmp_path):
    repo = _repository(tmp_path / "repo", cow=f"labkit-offline-probe=={os.getpid()}.0\n", bare="")
    config = repo / "cow" / "config.pbtxt"
    config.write_text(CONFIG + 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "/opt/env" } }\n')
    said: list[str] = []
    assert model_envs.wanted(repo) == {} and model_envs.envs_for(repo, progress=said.append) == {} and said == []
    config.write_text(CONFIG)  # without it, the list is built (and pip cannot: the package does not exist)
    assert model_envs.wanted(repo) == {"cow": repo / "cow" / "requirements.txt"}


def test_the_docker_server_reads_text_with_ocr_rec_from_its_own_environment(cpu_image):
    serve = Serve(
        str(real_models.repository()), "--any-ports", "--server", "docker", "--image", cpu_image, "--model", "ocr_rec"
    )
    try:
        assert serve.lines["serving"] == "ocr_rec"
        client = httpclient.InferenceServerClient(serve.lines["http"].removeprefix("http://"))
        crops = real_models.crops(real_models.LINES[:4])
        tensor = httpclient.InferInput("CROP", list(crops.shape), "FP32")
        tensor.set_data_from_numpy(crops)
        found = [row[0].decode() for row in client.infer("ocr_rec", [tensor]).as_numpy("TEXT")]
        client.close()
        assert real_models.character_accuracy(list(real_models.LINES[:4]), found) >= 0.95, found
        assert serve.stop(signal.SIGINT).strip().endswith("stopped.")
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert serve.proc.returncode == 0
