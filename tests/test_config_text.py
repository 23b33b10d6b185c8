"""A config.pbtxt written by hand (`%%triton_config NAME`, `repository.write_config_text`) is written as
written and validated by Triton at load; labkit refuses only what does not read as Triton's ModelConfig, and
a config Triton refuses comes back as a ModelLoadError whose reason is Triton's own. Lesson 19 also prints
the command line labkit gives Triton, read from the running process, beside `tritonserver --help`."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
from labkit import magics
from labkit.course import reference
from labkit.course.lessons import server_flags
from labkit.errors import ConfigError

ADD_SUB = """# add_sub, written by hand
name: "add_sub"
backend: "python"
input [
  { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with labkit.start(workdir=tmp_path_factory.mktemp("lab")) as server:
        yield server


def test_a_config_is_written_as_written_and_serves(lab, capsys):
    magics.triton_config("add_sub", ADD_SUB)
    assert "as written" in capsys.readouterr().out
    assert (lab.repository.model_dir("add_sub") / "config.pbtxt").read_text() == ADD_SUB
    lab.python_model("add_sub", reference.add_sub_source())
    assert labkit.check_add_sub(lab).ok
    same = labkit.model_config(
        "add_sub",
        "python",
        inputs=[("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])],
        outputs=[("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4])],
    )
    assert lab.repository.read_config("add_sub").input == same.input


def test_a_misspelt_field_or_another_models_name_is_refused_before_anything_is_written(lab):
    before = (lab.repository.model_dir("add_sub") / "config.pbtxt").read_text()
    with pytest.raises(ConfigError) as caught:
        magics.triton_config("add_sub", ADD_SUB.replace("dims: [ 4 ] }\n]", "dimz: [ 4 ] }\n]", 1))
    assert caught.value.field == "dimz"
    with pytest.raises(ConfigError) as caught:
        magics.triton_config("add_sub", ADD_SUB.replace('name: "add_sub"', 'name: "add_sup"'))
    assert (caught.value.field, caught.value.value) == ("name", "add_sup")
    assert (lab.repository.model_dir("add_sub") / "config.pbtxt").read_text() == before


def test_a_config_triton_refuses_fails_the_reload_with_tritons_reason_and_the_old_one_serves(lab, capsys):
    magics.triton_config("add_sub", ADD_SUB)
    lab.python_model("add_sub", reference.add_sub_source())
    no_type = ADD_SUB.replace('{ name: "OUTPUT1", data_type: TYPE_FP32, dims', '{ name: "OUTPUT1", dims')
    with pytest.raises(labkit.ModelLoadError) as caught:
        magics.triton_config("add_sub", no_type)  # add_sub is loaded: the cell reloads it
    assert "must specify 'data_type'" in caught.value.reason, caught.value.reason
    out = labkit.infer(lab, "add_sub", {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)})
    assert out["OUTPUT0"].tolist() == [2.0] * 4
    magics.triton_config("add_sub", ADD_SUB)
    assert "reloaded 'add_sub'" in capsys.readouterr().out.splitlines()[-1]


def test_the_command_line_is_read_from_triton_itself_beside_its_help(lab):
    flags = {flag.name: flag for flag in server_flags.flags(lab)}
    assert flags["--model-control-mode"].value == "explicit"
    assert flags["--model-control-mode"].help_default == "none"
    assert flags["--http-port"].help_default == "8000" and int(flags["--http-port"].value) == lab.endpoints.http_port
    assert flags["--http-address"].help_default == "0.0.0.0"
    assert flags["--disable-auto-complete-config"].help_default == "off (a switch, on when given)"
    assert flags["--backend-config"].value.startswith("python,shm-region-prefix-name=labkit_")
    assert all(flag.why for flag in flags.values())
