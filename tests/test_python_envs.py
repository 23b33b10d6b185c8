"""A model's own packages (issue 40, part 1 and 2) against a real Triton 23.12: execution environments made by
`labkit.python_env` as a folder and as a .tar.gz, given with EXECUTION_ENV_PATH; a missing module named;
numpy 2 and a Python the stub does not embed refused before Triton is asked; a backend folder's own stub
for another Python; `labkit python-env` and `labkit serve` of a person's repository; the Docker runtime."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as http
from tritonclient.utils import InferenceServerException

import labkit
from labkit.docker import cpu_image
from labkit.errors import ExecutionEnvError, InferenceError, MissingModuleError, ModelLoadError, PythonEnvError
from labkit.plumbing import triton_dist
from labkit.python_envs.env_contents import read_env
from labkit.python_envs.stub_pythons import runtime_stubs

DOUBLE = """
import sys
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        print("stub python", sys.version.split()[0], "prefix", sys.prefix, flush=True)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)])
                for r in requests]
"""
COW = DOUBLE.replace("import sys\n", "import sys\nimport cowsay\n")
X = np.array([1.0, 2.0], np.float32)


def _config(name: str, env: str = "", backend: str = "python") -> labkit.repository.ModelConfig:
    return labkit.model_config(
        name,
        backend=backend,
        inputs=[("X", "FP32", [2])],
        outputs=[("Y", "FP32", [2])],
        parameters={"EXECUTION_ENV_PATH": env} if env else None,
    )


def _stub_line(lab, name_hint: str = "stub python") -> str:
    return [line for line in lab.logs.tail(60).splitlines() if name_hint in line][-1]


@pytest.fixture(scope="module")
def lab():
    with labkit.start() as server:
        yield server


@pytest.fixture(scope="module")
def cow_env(tmp_path_factory) -> Path:
    """A folder environment with cowsay (built once per machine in labkit's cache, unpacked here)."""
    return labkit.python_env(tmp_path_factory.mktemp("envs") / "cow", ["cowsay==6.1"], progress=None).path


def _plain_venv(path: Path, *packages: str) -> Path:
    """A venv as a person makes one with today's pip (numpy 2 unless told otherwise)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(path / "bin/python"), "install", "-q", *packages],
        check=True,
        capture_output=True,
    )
    return path


def test_refused_before_anything_is_built(tmp_path):
    with pytest.raises(PythonEnvError) as caught:
        labkit.python_env(tmp_path / "env", python="3.12")
    assert (caught.value.problem, caught.value.wanted) == ("python", "3.12")
    assert caught.value.available == ["3.8", "3.9", "3.10", "3.11"]
    assert caught.value.runtime == runtime_stubs("embedded").where() and "3.11" in caught.value.remedy
    with pytest.raises(PythonEnvError) as caught:
        labkit.python_env(tmp_path / "env", python="3.10", runtime="docker")  # the CPU image holds 3.11 only
    assert (caught.value.wanted, caught.value.available) == ("3.10", ["3.11"])
    assert caught.value.runtime == f"image {cpu_image.IMAGE}"
    for kwargs, problem in [
        ({"python": "three"}, ("version", "three", "")),
        ({"runtime": "cloud"}, ("runtime", "", "cloud")),
        (
            {"runtime": "docker", "image": "example.org/triton:custom"},
            ("unknown stub", "", "image example.org/triton:custom"),
        ),
    ]:
        with pytest.raises(PythonEnvError) as caught:
            labkit.python_env(tmp_path / "env", **kwargs)
        assert (caught.value.problem, caught.value.wanted, caught.value.runtime) == problem and caught.value.remedy
    mine = tmp_path / "mine.tar.gz"
    mine.write_text("a person's file")
    with pytest.raises(PythonEnvError) as caught:
        labkit.python_env(tmp_path / "mine", pack=True)
    assert (caught.value.problem, caught.value.path) == ("exists", str(mine))
    assert mine.read_text() == "a person's file"
    with pytest.raises(PythonEnvError) as caught:
        labkit.python_env(tmp_path / "env", requirements=tmp_path / "nope.txt")
    assert caught.value.problem == "requirements"
    assert not (tmp_path / "env").exists()


def test_a_missing_module_is_named_then_a_folder_and_a_tarball_give_it(lab, cow_env, tmp_path):
    with pytest.raises(MissingModuleError) as caught:
        lab.python_model("cow", COW, _config("cow"))
    error = caught.value
    assert (error.model, error.module, error.environment) == ("cow", "cowsay", "")
    assert error.python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert "labkit python-env" in error.remedy and "EXECUTION_ENV_PATH" in error.remedy
    assert "cowsay" in error.reason  # Triton's own words stay in reason

    model_dir = lab.repository.model_dir("cow")
    shutil.copytree(cow_env, model_dir / "env", symlinks=True)
    lab.python_model("cow", COW, _config("cow", "$$TRITON_MODEL_DIRECTORY/env"))
    assert labkit.infer(lab, "cow", {"X": X})["Y"].tolist() == (X * 2).tolist()
    version, prefix = _stub_line(lab).split()[2], _stub_line(lab).split()[-1]
    assert version == sys.version.split()[0] and prefix == str(model_dir / "env")

    packed = labkit.python_env(model_dir / "env", ["cowsay==6.1"], pack=True, progress=None)
    assert packed.path == model_dir / "env.tar.gz" and packed.cached  # the folder's build, compressed
    assert read_env(packed.path).numpy == read_env(model_dir / "env").numpy == packed.numpy
    assert packed.numpy.startswith("1.")
    lab.repository.write_config(_config("cow", "$$TRITON_MODEL_DIRECTORY/env.tar.gz"))
    lab.load("cow")
    assert labkit.infer(lab, "cow", {"X": X})["Y"].tolist() == (X * 2).tolist()
    assert "/python_env_" in _stub_line(lab).split()[-1]  # python_backend unpacked it into a folder of its own


def test_a_stopped_server_leaves_nothing_of_what_python_backend_unpacked(cow_env, tmp_path):
    # python_backend unpacks a .tar.gz into a /tmp/python_env_* folder of its own and removes that
    # folder only in its finalize (r23.12 src/pb_env.cc:325), which a killed Triton never runs.
    packed = labkit.python_env(tmp_path / "cow", ["cowsay==6.1"], pack=True, progress=None).path
    with labkit.start() as server:
        server.repository.model_dir("cow").mkdir(parents=True)
        shutil.copy(packed, server.repository.model_dir("cow") / "env.tar.gz")
        server.python_model("cow", COW, _config("cow", "$$TRITON_MODEL_DIRECTORY/env.tar.gz"))
        unpacked = Path(_stub_line(server).split()[-1])
        made = next(p for p in unpacked.parents if p.name.startswith("python_env_"))
        assert (unpacked / "bin").is_dir()
    assert not made.exists()


def test_a_module_the_environment_lacks_names_the_environment(lab, cow_env):
    source = COW.replace("import cowsay\n", "import cowsay\nimport labkit_no_such_module\n")
    shutil.copytree(cow_env, lab.repository.model_dir("cow2") / "env", symlinks=True)
    with pytest.raises(MissingModuleError) as caught:
        lab.python_model("cow2", source, _config("cow2", "$$TRITON_MODEL_DIRECTORY/env"))
    assert (caught.value.module, caught.value.environment) == (
        "labkit_no_such_module",
        "$$TRITON_MODEL_DIRECTORY/env",
    )


def test_an_import_guarded_by_try_is_not_blamed(lab):
    source = (
        "try:\n    import labkit_no_such_module\nexcept ImportError:\n    pass\n\n"
        "class TritonPythonModel:\n    def initialize(self, args):\n        raise RuntimeError('broken on purpose')\n"
    )
    with pytest.raises(ModelLoadError) as caught:
        lab.python_model("guarded", source, _config("guarded"))
    assert type(caught.value) is ModelLoadError and "broken on purpose" in caught.value.reason


def test_numpy_2_is_refused_before_triton_which_would_answer_empty_outputs(lab, tmp_path):
    model_dir = lab.repository.model_dir("trap")
    _plain_venv(model_dir / "env", "numpy>=2", "cowsay==6.1")
    lab.repository.write_python_model("trap", COW)
    lab.repository.write_config(_config("trap", "$$TRITON_MODEL_DIRECTORY/env"))
    with pytest.raises(ExecutionEnvError) as caught:
        lab.load("trap")
    error = caught.value
    assert (error.problem, error.model, error.environment) == ("numpy", "trap", str(model_dir / "env"))
    assert error.found.startswith("2.") and error.needed.startswith("<2") and np.__version__ in error.needed
    assert not any(m["name"] == "trap" and m.get("state") for m in lab.models.index())  # Triton never saw it
    # Triton's own repository API loads it all the same: then every output comes back empty.
    client = lab.client()
    client.load_model("trap")
    tensor = http.InferInput("X", [2], "FP32")
    tensor.set_data_from_numpy(X)
    binary = client.infer("trap", [tensor])
    assert binary.get_response()["outputs"][0]["parameters"]["binary_data_size"] == 0
    with pytest.raises(ValueError, match="size 0"):
        binary.as_numpy("Y")
    with pytest.raises(InferenceError) as answered:  # labkit.infer says so instead of numpy's ValueError
        labkit.infer(lab, "trap", {"X": X})
    assert type(answered.value) is InferenceError
    assert (answered.value.model, answered.value.reason) == ("trap", "output data do not fill its shape")
    with pytest.raises(InferenceServerException, match="output tensor shape does not match size of output"):
        client.infer("trap", [tensor], outputs=[http.InferRequestedOutput("Y", binary_data=False)])
    client.unload_model("trap")


def test_a_backend_folders_own_stub_serves_another_python(lab, tmp_path):
    try:
        env = labkit.python_env(tmp_path / "env310", python="3.10", progress=None)
    except PythonEnvError as exc:  # a machine without Python 3.10: said so, nothing built
        assert (exc.problem, exc.wanted) == ("interpreter", "3.10") and not (tmp_path / "env310").exists()
        pytest.skip(f"no Python 3.10 here: {exc}")
    source = DOUBLE
    lab.repository.write_python_model("py310", source)
    lab.repository.write_config(_config("py310", str(env.path)))
    with pytest.raises(ExecutionEnvError) as caught:  # the stub backends/python runs embeds the lab's Python
        lab.load("py310")
    assert (caught.value.problem, caught.value.found, caught.value.needed) == (
        "python",
        "3.10",
        f"{sys.version_info[0]}.{sys.version_info[1]}",
    )
    # The Python-based backends rule: a backend folder's own stub, utilities and libtriton_python.so win.
    lab.python_backend("own310", source, reload=False)
    folder = lab.workspace.backend_dir / "own310"
    dist = triton_dist.locate()
    shutil.copy(dist.stub_for((3, 10)), folder)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy(dist.python_backend_dir / name, folder)
    lab.repository.write_config(_config("py310", str(env.path), backend="own310"))
    lab.load("py310")
    assert labkit.infer(lab, "py310", {"X": X})["Y"].tolist() == (X * 2).tolist()
    assert _stub_line(lab).split()[2].startswith("3.10.") and _stub_line(lab).split()[-1] == str(env.path)


def test_cli_builds_an_environment_and_serve_gives_it_to_a_persons_model(tmp_path):
    repo = labkit.repository.ModelRepository(tmp_path / "repo")
    for name, env in (("cow", "$$TRITON_MODEL_DIRECTORY/env"), ("bare", "")):
        repo.write_python_model(name, COW)
        repo.write_config(_config(name, env))
    labkit_cli = [sys.executable, "-m", "labkit.cli"]
    built = subprocess.run(
        [*labkit_cli, "python-env", str(repo.root / "cow" / "env"), "--package", "cowsay==6.1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    assert (
        'config      parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/env" } }'
        in (built.stdout.splitlines())
    )
    again = subprocess.run(
        [*labkit_cli, "python-env", str(repo.root / "cow" / "env"), "--package", "cowsay==6.1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 3 and "exists already" in again.stderr
    before = {p for p in repo.root.rglob("*") if "__pycache__" not in p.parts}
    serve = subprocess.Popen(
        [*labkit_cli, "serve", str(repo.root), "--any-ports"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert serve.stdout is not None
        lines = {}
        for line in serve.stdout:
            key, _, value = line.strip().partition(" ")
            lines[key] = value.strip()
            if key == "log":
                break
        assert lines["serving"] == "cow"
    finally:
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=60)
    assert serve.returncode == 0
    not_loaded = [line for line in err.splitlines() if line.startswith("NOT LOADED bare: ")]
    assert not_loaded and "imports 'cowsay'" in not_loaded[0]
    assert any("labkit python-env" in line for line in err.splitlines())
    assert {p for p in repo.root.rglob("*") if "__pycache__" not in p.parts} == before  # nothing written into it


def test_the_docker_runtime_gets_an_environment_for_its_own_python(dserver):
    with pytest.raises(MissingModuleError) as caught:  # the container's python3 was asked
        dserver.python_model("bare", COW, _config("bare"))
    assert (caught.value.module, caught.value.python) == ("cowsay", "3.11")
    model_dir = dserver.repository.model_dir("cow")
    env = labkit.python_env(model_dir / "env", ["cowsay==6.1"], runtime="docker", progress=None)
    assert (model_dir / "env/bin/python3.11").readlink() == Path("/usr/bin/python3.11")  # the image's interpreter
    dserver.python_model("cow", COW, _config("cow", "$$TRITON_MODEL_DIRECTORY/env"))
    assert labkit.infer(dserver, "cow", {"X": X})["Y"].tolist() == (X * 2).tolist()
    words = _stub_line(dserver).split()
    assert words[2].startswith("3.11.") and words[-1] == str(env.path)  # the repository is mounted at its own path
    labkit.python_env(model_dir / "env", ["cowsay==6.1"], runtime="docker", pack=True, progress=None)
    dserver.repository.write_config(_config("cow", "$$TRITON_MODEL_DIRECTORY/env.tar.gz"))
    dserver.load("cow")
    assert labkit.infer(dserver, "cow", {"X": X})["Y"].tolist() == (X * 2).tolist()
    assert "/python_env_" in _stub_line(dserver).split()[-1]
