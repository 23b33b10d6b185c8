"""Exercises of notebook 05 (Triton in a container): a model that reads a file from the mounted
repository, and one whose log, written inside the container, reaches this machine while it serves.

Both checks run the person's model.py in a model of its own (labkit.exercises.scratch): the file check
with a scale.txt of its own, the log check reading requests.log in its folder on this machine while
the model serves and again after it unloads, so the notebook's files and models stay as they were.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..client.inference import infer
from ..errors import InferenceError, ModelLoadError
from ..server.base import TritonServer
from .core import NotYet, exercise
from .scratch import config_of, scratch_model

FILE_MODEL = "filescale_py"
JOURNAL_MODEL, LOG = "journal_py", "requests.log"


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


@exercise(
    "05-scale-file",
    "05_docker",
    "read scale.txt from the model's folder inside the container",
    "initialize() is told where the model's folder is, as Triton sees it, and the repository is mounted at the "
    "same path in the container (python_backend README, r23.12: "
    "https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#initialize).",
    sources=(FILE_MODEL,),
)
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


def _logged(path: Path) -> list[str] | None:
    """The lines of ``path`` on this machine, or None if it does not exist."""
    return path.read_text().splitlines() if path.exists() else None


@exercise(
    "05-journal",
    "05_docker",
    "a log the model writes inside the container, read on this machine while it serves",
    "the model runs in the container and sees the container's files: only the model repository is mounted from "
    "this machine (at the same path). A file object also keeps what is written in a buffer (Python's io docs: "
    "https://docs.python.org/3/library/io.html#io.IOBase.flush).",
    sources=(JOURNAL_MODEL,),
)
def journal(server: TritonServer) -> None:
    source = server.repository.model_dir(JOURNAL_MODEL) / "1" / "model.py"
    if not source.exists():
        raise NotYet(
            f"model {JOURNAL_MODEL!r} has no model.py yet.",
            f"run the `%%triton_python {JOURNAL_MODEL}` cell first.",
            rule="setup",
        )
    config = config_of(server, JOURNAL_MODEL, "the cell that writes its config")
    sent = [np.array(v, np.float32) for v in ([1.0, 2.0, 3.0], [-4.5, 0.5, 2.5], [100.0, 0.25, 0.0])]
    wanted = [float(x.sum()) for x in sent]
    with scratch_model(server, "journal", config, {"1/model.py": source.read_text()}) as model:
        folder = server.repository.model_dir(model)
        try:
            server.load(model)
        except ModelLoadError as exc:
            raise NotYet(
                f"model.py of {JOURNAL_MODEL} does not load: {exc.reason.strip().splitlines()[-1]}", rule="load"
            ) from None
        for x in sent:
            try:
                infer(server, model, {"X": x})
            except InferenceError as exc:
                raise NotYet(f"a request with X={x.tolist()} failed: {_first_line(exc)}", rule="failed") from None
        serving = _logged(folder / LOG)
        in_version = _logged(folder / "1" / LOG)
        server.unload(model)  # finalize() runs: what was only buffered is written now
        unloaded = _logged(folder / LOG)
    if serving is None and unloaded is None:
        where = (
            " (there is one in the version folder 1/, beside model.py; the exercise wants it beside config.pbtxt)"
            if in_version is not None
            else ""
        )
        raise NotYet(
            f"after {len(sent)} requests, the model's folder on this machine has no {LOG}{where}.", rule="no-file"
        )
    lines = [line for line in (serving or []) if line.strip()]
    if len(lines) < len(sent) and len([line for line in unloaded or [] if line.strip()]) >= len(sent):
        raise NotYet(
            f"after {len(sent)} requests, {LOG} held {len(lines)} line(s) while the model served; the rest "
            f"appeared only when the model unloaded.",
            rule="unflushed",
        )
    try:
        got = [float(line) for line in lines]
    except ValueError:
        raise NotYet(
            f"{LOG} holds {lines[:3]} after {len(sent)} requests with X sums {wanted}: each line should be one "
            f"request's sum, a number.",
            rule="values",
        ) from None
    if got != wanted and got[-len(sent) :] != wanted:
        raise NotYet(
            f"after {len(sent)} requests with X {[x.tolist() for x in sent]}, {LOG} holds {got}, not one sum per "
            f"request {wanted}.",
            rule="values",
        )
