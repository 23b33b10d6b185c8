"""Exercises of notebook 05 (Triton in a container): a model that reads a file from the mounted
repository, and a C++ backend compiled inside the container."""

from __future__ import annotations

import numpy as np

from ..inference import infer
from ..server.base import TritonServer
from .core import NotYet, exercise

FILE_MODEL = "filescale_py"
PLUS_ONE = "plusone"


@exercise("05-scale-file", "05_docker", "read scale.txt from the model's folder inside the container",
          "in initialize(), open os.path.join(args[\"model_repository\"], \"scale.txt\"): the repository is mounted "
          "at the same path in the container, so that folder is the one on this machine.")
def scale_file(server: TritonServer) -> None:
    x = np.array([1.0, -2.0, 0.5], np.float32)
    for scale in (3.5, -2.0):
        server.repository.write_file(FILE_MODEL, "scale.txt", f"{scale}\n", version=None)
        server.load(FILE_MODEL)
        y = infer(server, FILE_MODEL, {"X": x})["Y"]
        if not np.allclose(y, scale * x):
            raise NotYet(f"with scale.txt holding {scale}, X={x.tolist()} gave {y.tolist()}, not {(scale * x).tolist()}.")


@exercise("05-plus-one", "05_docker", "a C++ backend, compiled in the container, that adds one",
          "in the function passed to labkit::execute, add 1 to each int32 value of the input tensor before "
          "batch.output() sends it back.")
def plus_one(server: TritonServer) -> None:
    sent = np.array([41, -1, 0, 2_147_483_000], np.int32)
    got = infer(server, PLUS_ONE, {"IN0": sent})["OUT0"]
    if np.array_equal(got, sent):
        raise NotYet(f"OUT0 is IN0 unchanged ({sent.tolist()}).")
    if not np.array_equal(got, sent + 1):
        raise NotYet(f"for IN0={sent.tolist()} OUT0 was {got.tolist()}, expected {(sent + 1).tolist()}.")
