"""Exercises of notebook 05 (Triton in a container): a model that reads a file from the mounted
repository, and one whose log, written inside the container, reaches this machine while it serves.

Both checks run the person's model.py in a model of its own (labkit.course.exercises.scratch): the file check
with a scale.txt of its own, the log check reading requests.log in its folder on this machine while
the model serves and again after it unloads, so the notebook's files and models stay as they were.
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError, ModelLoadError
from ...server.base import TritonServer
from .core import NotYet, exercise
from .scratch import config_of, scratch_model

FILE_MODEL = "filescale_py"
JOURNAL_MODEL, LOG = "journal_py", "requests.log"


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


@exercise("05-scale-file", sources=(FILE_MODEL,))
def scale_file(server: TritonServer) -> None:
    source = server.repository.model_dir(FILE_MODEL) / "1" / "model.py"
    if not source.exists():
        raise NotYet(
            f"model {FILE_MODEL!r} has no model.py yet.",
            f"run the `%%triton_python {FILE_MODEL}` cell first.",
            rule="setup",
        )
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
                raise NotYet(
                    f"with scale.txt holding {scale}, the model did not load: {exc.reason}", rule="load"
                ) from None
            except InferenceError as exc:
                raise NotYet(
                    f"with scale.txt holding {scale}, a request failed: {_first_line(exc)}", rule="failed"
                ) from None
            if y.shape != x.shape or not np.allclose(y, scale * x):
                raise NotYet(
                    f"with scale.txt holding {scale}, X={x.tolist()} gave {y.tolist()}, not {(scale * x).tolist()}.",
                    rule="values",
                )
