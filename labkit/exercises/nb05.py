"""Exercises of notebook 05 (Triton in a container): a model that reads a file from the mounted
repository, and a C++ backend compiled inside the container.

The file check runs the person's model.py in a model of its own (labkit.exercises.scratch) with a
scale.txt of its own, so the notebook's file and model stay as they were; the C++ check only sends
requests to the person's model.
"""

from __future__ import annotations

import numpy as np

from ..errors import InferenceError, ModelLoadError
from ..inference import infer
from ..server.base import TritonServer
from .core import NotYet, exercise
from .scratch import config_of, scratch_model

FILE_MODEL = "filescale_py"
PLUS_ONE = "plusone"


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


@exercise("05-scale-file", "05_docker", "read scale.txt from the model's folder inside the container",
          "in initialize(), open os.path.join(args[\"model_repository\"], \"scale.txt\"): the repository is mounted "
          "at the same path in the container, so that folder is the one on this machine.",
          sources=(FILE_MODEL,))
def scale_file(server: TritonServer) -> None:
    source = server.repository.model_dir(FILE_MODEL) / "1" / "model.py"
    if not source.exists():
        raise NotYet(f"model {FILE_MODEL!r} has no model.py yet.", f"run the `%%triton_python {FILE_MODEL}` cell first.",
                     rule="setup")
    config = config_of(server, FILE_MODEL, "the cell that writes its config and scale.txt")
    x = np.array([1.0, -2.0, 0.5], np.float32)
    with scratch_model(server, "scale_file", config, {"1/model.py": source.read_text()}) as model:
        for scale in (3.5, -2.0):
            server.repository.write_file(model, "scale.txt", f"{scale}\n", version=None)
            server.repository.mark_changed(model)
            try:
                server.load(model)
                y = infer(server, model, {"X": x})["Y"]
            except ModelLoadError as exc:
                raise NotYet(f"with scale.txt holding {scale}, the model did not load: {exc.reason}", rule="load") from None
            except InferenceError as exc:
                raise NotYet(f"with scale.txt holding {scale}, a request failed: {_first_line(exc)}", rule="failed") from None
            if y.shape != x.shape or not np.allclose(y, scale * x):
                raise NotYet(f"with scale.txt holding {scale}, X={x.tolist()} gave {y.tolist()}, not {(scale * x).tolist()}.",
                             rule="values")


@exercise("05-plus-one", "05_docker", "a C++ backend, compiled in the container, that adds one",
          "in the function passed to labkit::execute, add 1 to each int32 value of the input tensor before "
          "batch.output() sends it back.",
          sources=(PLUS_ONE,))
def plus_one(server: TritonServer) -> None:
    for sent in (np.array([41, -1, 0, 2_147_483_000], np.int32), np.array([7, 100, -2_000_000_000, 123_456_789], np.int32)):
        try:
            got = infer(server, PLUS_ONE, {"IN0": sent})["OUT0"]
        except InferenceError as exc:
            raise NotYet(f"for IN0={sent.tolist()} the request failed: {_first_line(exc)}", rule="failed") from None
        if got.dtype != np.int32 or got.shape != sent.shape:
            raise NotYet(f"OUT0 came back as {got.dtype} of shape {list(got.shape)}; the config says INT32 [4].", rule="shape")
        if np.array_equal(got, sent):
            raise NotYet(f"OUT0 is IN0 unchanged ({sent.tolist()}).", rule="unchanged")
        if not np.array_equal(got, sent + 1):
            raise NotYet(f"for IN0={sent.tolist()} OUT0 was {got.tolist()}, expected {(sent + 1).tolist()}.", rule="values")
