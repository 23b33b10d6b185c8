"""A lab's repository, exported with `labkit export-repository`, serves unchanged in a Triton 23.12 image
started with Triton's own defaults: the offline CPU image runs the same tritonserver 2.41 from the same
/opt/tritonserver layout as NVIDIA's `tritonserver:23.12-py3` (which cannot be pulled here). The container
gets exactly the mounts and the command the export's README gives, and nothing of labkit."""

from __future__ import annotations

import shlex
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
from waiting_support import eventually

import labkit
from labkit.course import reference
from labkit.errors import RepositoryError
from labkit.repository.repository_export import IMAGE, export_repository

SCALER = """import json
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.scale = float(json.loads(args["model_config"])["parameters"]["scale"]["string_value"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * self.scale)])
                for r in requests]
"""
PAIR = [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])]
SUM_DIFFERENCE = [("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4])]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with labkit.start(workdir=tmp_path_factory.mktemp("lab")) as server:
        server.python_model(
            "add_sub", reference.add_sub_source(), labkit.model_config("add_sub", "python", PAIR, SUM_DIFFERENCE)
        )
        server.python_backend("scaler", SCALER)
        server.repository.write_config(
            labkit.model_config("double", "scaler", [("X", "FP32", [3])], [("Y", "FP32", [3])], parameters={"scale": 2})
        )
        server.load("double")
        server.repository.write_config(
            labkit.model_config("native", "minimal", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
        )
        yield server


def test_the_export_holds_what_the_image_serves_and_says_what_it_left_out(lab, tmp_path):
    exported = export_repository(lab.repository, tmp_path / "out", backends=lab.workspace.backend_dir)
    assert exported.models == ("add_sub", "double") and exported.backends == ("scaler",)
    assert list(exported.left_out) == ["native"] and "labkit export minimal DIR" in exported.left_out["native"]
    config = (lab.repository.model_dir("add_sub") / "config.pbtxt").read_text()
    assert (tmp_path / "out/models/add_sub/config.pbtxt").read_text() == config
    assert sorted(p.name for p in (tmp_path / "out/models/add_sub").iterdir()) == sorted(
        ["config.pbtxt", str(lab.repository.versions("add_sub")[-1])]
    )
    assert (tmp_path / "out/backends/scaler/model.py").read_text() == SCALER
    readme = (tmp_path / "out/README.md").read_text()
    assert exported.command() in readme and IMAGE in readme and "`native`" in readme
    with pytest.raises(RepositoryError):
        export_repository(lab.repository, tmp_path / "out")  # not empty: nothing written
    with pytest.raises(RepositoryError):
        export_repository(lab.repository, tmp_path / "other", models=["nope"])


def test_the_command_line_says_what_to_copy_and_how_to_start_it(lab, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "labkit.cli",
            "export-repository",
            str(lab.repository.root),
            str(tmp_path / "out"),
            "--backends",
            str(lab.workspace.backend_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"wrote {tmp_path / 'out'}/models (add_sub, double)"
    assert any(line.startswith("left out native: ") for line in lines)
    assert lines[-1].strip().startswith("docker run --rm -p 8000:8000") and IMAGE in lines[-1]


def test_the_export_serves_unchanged_with_tritons_defaults_in_the_23_12_image(lab, tmp_path, cpu_image, engine):
    exported = export_repository(lab.repository, tmp_path / "out", backends=lab.workspace.backend_dir)
    # The README's command, run as written but for the image (the CPU one) and the host port (any free one).
    command = shlex.split(
        exported.command(models=str(tmp_path / "out/models"), backends=str(tmp_path / "out/backends"))
    )
    image_at = command.index(IMAGE)
    volumes = {
        part.split(":")[0]: {"bind": part.split(":")[1], "mode": "ro"} for part in command[:image_at] if ":/" in part
    }
    assert command[image_at + 1 :] == ["tritonserver", "--model-repository=/models"]
    container = engine.containers.run(
        cpu_image,
        command[image_at + 1 :],
        volumes=volumes,
        ports={"8000/tcp": ("127.0.0.1", None)},
        detach=True,
        labels={"labkit.test": "export-repository"},
    )
    try:
        container.reload()
        port = int(container.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"])

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2) as answer:
                    return answer.status == 200
            except OSError:
                return False

        eventually(ready, "the image's Triton ready with every exported model", timeout_s=90, interval_s=0.5)
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        a, b = np.array([1, 2, 3, 4], np.float32), np.array([0.5, 0.5, 2, 8], np.float32)
        inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        answer = client.infer("add_sub", inputs)
        assert answer.as_numpy("OUTPUT0") is not None, answer.get_response()
        assert answer.as_numpy("OUTPUT0").tolist() == (a + b).tolist()
        x = httpclient.InferInput("X", [3], "FP32")
        x.set_data_from_numpy(np.array([1, -2, 3], np.float32))
        assert client.infer("double", [x]).as_numpy("Y").tolist() == [2, -4, 6]
        index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
        assert index == {"add_sub": "READY", "double": "READY"}, index
        client.close()
    finally:
        container.remove(force=True)
