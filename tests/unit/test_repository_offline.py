"""The model repository writer without a server: configs through files, names checked, atomic writes,
model sources (a server serving the repository, and a read-only one: tests/test_repository.py)."""

from __future__ import annotations

import linecache
import os
from pathlib import Path

import pytest

import labkit
import labkit.errors
import labkit.repository
from labkit.repository import config as cfgmod

ADD_SUB = labkit.course.reference.add_sub_source()


def test_config_round_trip(tmp_path):
    repo = labkit.repository.ModelRepository(tmp_path)
    cfg = labkit.model_config(
        "m",
        "python",
        [("IN", "FP32", [4]), ("TEXT", "BYTES", [-1])],
        [("OUT", "INT64", [2, 2])],
        max_batch_size=8,
        dynamic_batching={"max_queue_delay_microseconds": 500, "preferred_batch_size": [4]},
        instances=2,
        parameters={"k": "v"},
    )
    path = repo.write_config(cfg)
    assert path == tmp_path.resolve() / "m" / "config.pbtxt"
    back = repo.read_config("m")
    assert back == cfg
    assert back.input[1].data_type == cfgmod.pb.TYPE_STRING
    assert back.dynamic_batching.preferred_batch_size == [4]
    assert back.instance_group[0].count == 2
    assert back.parameters["k"].string_value == "v"
    assert "max_queue_delay_microseconds: 500" in path.read_text()


def test_reference_configs_parse():
    repo = labkit.repository.ModelRepository(labkit.reference_repository())
    assert {"add_sub", "add_sub_batching"} <= set(repo.models())
    batching = repo.read_config("add_sub_batching")
    assert batching.max_batch_size == 8 and batching.HasField("dynamic_batching")
    assert repo.read_config("add_sub").max_batch_size == 0


def test_wrong_type_is_named(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.pbtxt").write_text('name: "m"\nmax_batch_size: "eight"\n')
    with pytest.raises(labkit.errors.ConfigError) as info:
        labkit.repository.ModelRepository(tmp_path).read_config("m")
    assert info.value.field == "max_batch_size" and info.value.source == str(tmp_path.resolve() / "m" / "config.pbtxt")


def test_a_missing_config_is_one_error_wherever_it_is_found(tmp_path):
    from labkit.native.export import _copy_model

    repo = labkit.repository.ModelRepository(tmp_path / "repo")
    repo.write_python_model("m", ADD_SUB)  # m/1/model.py, no config.pbtxt
    wanted = str(repo.model_dir("m") / "config.pbtxt")
    for call in (
        lambda: repo.read_config("m"),
        lambda: labkit.repository.ModelRepository(tmp_path / "other").copy_model_from(repo.root, "m"),
        lambda: _copy_model(repo, "m", tmp_path / "exported" / "m"),
    ):
        with pytest.raises(labkit.errors.MissingConfigError) as info:
            call()
        assert isinstance(info.value, labkit.errors.ConfigError | labkit.errors.RepositoryError)
        assert (info.value.model, info.value.lacks, info.value.missing) == ("m", ["config.pbtxt"], "config.pbtxt")
        assert Path(info.value.source) == Path(wanted)
    assert not (tmp_path / "exported").exists() and not (tmp_path / "other" / "m").exists()


def test_incomplete_config_refused(tmp_path):
    with pytest.raises(labkit.errors.ConfigError) as info:
        labkit.repository.ModelRepository(tmp_path).write_config(labkit.repository.ModelConfig(name="m"))
    assert "backend" in info.value.lacks
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("bad", ["", "..", ".", "../evil", "a/b", "/abs", ".hidden", "a b", "-x"])
def test_bad_model_names_refused_before_writing(tmp_path, bad):
    repo = labkit.repository.ModelRepository(tmp_path / "repo")
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(labkit.errors.InvalidNameError):
        repo.write_python_model(bad, ADD_SUB)
    with pytest.raises(labkit.errors.InvalidNameError):
        repo.write_config(labkit.model_config(bad, "python", [("I", "FP32", [1])], [("O", "FP32", [1])]))
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("bad", ["../x.py", "/etc/passwd", "a/../../b", "", ".."])
def test_file_paths_cannot_escape(tmp_path, bad):
    repo = labkit.repository.ModelRepository(tmp_path / "repo")
    with pytest.raises(labkit.errors.InvalidNameError):
        repo.write_file("m", bad, b"x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.py").exists()


def test_versions_and_atomic_write(tmp_path):
    repo = labkit.repository.ModelRepository(tmp_path)
    repo.write_python_model("m", ADD_SUB, version=1)
    repo.write_python_model("m", ADD_SUB, version=3)
    assert repo.versions("m") == [1, 3]
    leftovers = [p.name for p in (tmp_path / "m").rglob("*") if p.name.startswith(".")]
    assert leftovers == []  # the temporary files of atomic writes are gone
    with pytest.raises(labkit.errors.RepositoryError) as info:
        repo.write_python_model("m", ADD_SUB, version=0)
    assert info.value.refused == 0 and repo.versions("m") == [1, 3]


def test_each_write_moves_the_whole_second_stamp(tmp_path):
    repo = labkit.repository.ModelRepository(tmp_path)
    stamps = []
    for _ in range(3):
        path = repo.write_python_model("m", ADD_SUB)
        stamps.append(int(os.stat(path).st_mtime))
    assert stamps[0] < stamps[1] < stamps[2]


def test_model_source_from_class_defined_in_a_cell():
    # IPython keeps cell sources in linecache under a made-up file name; emulate that.
    cell = (
        "import math\n\nclass Doubler:\n    def execute(self, requests):\n        return [math.pi for _ in requests]\n"
    )
    filename = "<ipython-input-test-cell>"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(cell, filename, "exec"), namespace)
    from labkit.repository.python_source import model_source

    text = model_source(namespace["Doubler"])
    assert "import math" in text and "import triton_python_backend_utils as pb_utils" in text
    assert "class Doubler:" in text and "TritonPythonModel = Doubler" in text
    compile(text, "model.py", "exec")


def test_model_source_without_triton_class_refused():
    from labkit.repository.python_source import model_source

    with pytest.raises(labkit.errors.RepositoryError) as info:
        model_source("def execute(requests): pass\n")
    assert info.value.missing == "TritonPythonModel"


def test_a_name_too_long_for_the_file_system_is_refused_before_writing(tmp_path):
    repo = labkit.repository.ModelRepository(tmp_path)
    long = "m" * 300
    with pytest.raises(labkit.errors.InvalidNameError) as info:
        repo.write_config(labkit.model_config(long, "python", [("X", "FP32", [1])], [("Y", "FP32", [1])]))
    assert info.value.name == long and info.value.what == "model"
    with pytest.raises(labkit.errors.InvalidNameError) as info:
        repo.write_file("m", "f" * 300, "x")
    assert info.value.what == "file"
    assert list(tmp_path.iterdir()) == []
    # the longest name allowed still fits with the atomic write's temporary name
    edge = "e" * labkit.repository.names.MAX_NAME
    repo.write_file("m", edge, "x")
    assert (tmp_path / "m" / "1" / edge).read_text() == "x"


def test_models_without_a_config_are_listed_apart(tmp_path):
    repo = labkit.repository.ModelRepository(tmp_path)
    repo.write_python_model("bare", ADD_SUB)  # bare/1/model.py only: a model for auto-complete
    repo.write_config(labkit.model_config("full", "python", [("I", "FP32", [1])], [("O", "FP32", [1])]))
    (tmp_path / "notes").mkdir()  # no version folder: not a model
    assert (repo.models(), repo.unconfigured()) == (["full"], ["bare"])
