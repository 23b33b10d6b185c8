"""The exercise of notebook 11 (the Python backend in production): a model that imports a package the
server's Python lacks, given an execution environment of its own.

The check reads what Triton serves (the loaded config's EXECUTION_ENV_PATH), what the environment holds
(without running it) and what the model answers for a text of the check's own.
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import ModelLoadError
from ...python_envs.env_contents import read_env
from ...python_envs.stub_pythons import version_text
from ...server.base import TritonServer
from ...server.env_checks import ENV_KEY, MODEL_DIR, environment
from .core import NotYet, exercise

MODEL = "moo"
PACKAGE = "cowsay"


@exercise("11-own-package")
def own_package(server: TritonServer) -> None:
    before = server.loaded_models()
    try:
        _judge(server)
    finally:
        if MODEL not in before and MODEL in server.loaded_models():
            server.unload(MODEL)  # the check loaded it: leave the server as it found it


def _judge(server: TritonServer) -> None:
    try:
        server.load(MODEL)  # the config the cell wrote last
    except ModelLoadError as exc:
        missing = getattr(exc, "module", "")
        raise NotYet(
            f"model {MODEL!r} does not load"
            + (
                f": its model.py imports {missing!r}, which its stub's Python lacks."
                if missing
                else f": {exc.reason[:200]}"
            ),
            f"build an environment with {PACKAGE} in moo's folder and name it in moo's config.",
            rule="not-loaded",
        ) from None
    given = server.model_config(MODEL).get("parameters", {}).get(ENV_KEY, {}).get("string_value", "")
    if not given:
        raise NotYet(
            f"{MODEL!r} serves without an {ENV_KEY}: it runs on the server's own Python, which the check does not judge.",
            f"leave the lab's environment as it is and give {MODEL} one of its own.",
            rule="no-environment",
        )
    if not given.startswith(f"{MODEL_DIR}/"):
        raise NotYet(
            f"{MODEL!r}'s {ENV_KEY} is {given!r}: a path outside its folder breaks when the repository moves "
            f"(or is mounted into a container).",
            f"put the environment in {MODEL}'s folder and write the path as {MODEL_DIR}/<name>.",
            rule="absolute-path",
        )
    _, path = environment(server.models, MODEL, server.repository.read_config(MODEL))
    contents = read_env(path) if path is not None and path.exists() else None
    if contents is None or not contents.has_module(PACKAGE):
        raise NotYet(
            f"the environment {given} does not hold {PACKAGE}.",
            "build it with the package moo imports.",
            rule="package",
        )
    text = "hello from the check"
    said = infer(server, MODEL, {"TEXT": np.array([text.encode()], dtype=object)})["SAID"]
    answer = said.reshape(-1)[0]
    answer = answer.decode() if isinstance(answer, bytes) else str(answer)
    if text not in answer or "(oo)" not in answer:
        raise NotYet(
            f"{MODEL!r} answered {answer[:80]!r} for {text!r}, not a cow saying it.",
            f"keep moo's model.py as the notebook wrote it (Python {version_text(contents.python or (0, 0))}).",
            rule="answer",
        )
