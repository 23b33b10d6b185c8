"""The exercise of notebook 11 (the Python backend in production): two models that import the same package
the server's Python lacks, given one execution environment that both configs name.

What the python_backend README (r23.12, "Creating Custom Execution Environments", notes 3 and 4, lines
977-984) documents is what the check asks: a single environment may serve several models, each config
giving its path; a path under ``$$TRITON_MODEL_DIRECTORY`` must not escape the model's folder (what
happens then is undefined), so a shared one is named by a path of the machine. The check reads what
Triton serves (each loaded config's EXECUTION_ENV_PATH), what the environment holds (without running it),
and what each model answers for a text of the check's own.
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...errors import ModelLoadError
from ...python_envs.env_contents import read_env
from ...server.base import TritonServer
from ...server.env_checks import ENV_KEY, MODEL_DIR, environment
from .core import NotYet, exercise

PACKAGE = "cowsay"
#: Each model, and a line of its animal that cowsay draws around the text.
SAYERS = {"moo": "(oo)", "tux": "|o_o |"}


@exercise("11-own-package")
def own_package(server: TritonServer) -> None:
    before = server.loaded_models()
    try:
        _judge(server)
    finally:
        for model in SAYERS:
            if model not in before and model in server.loaded_models():
                server.unload(model)  # the check loaded it: leave the server as it found it


def _load(server: TritonServer, model: str) -> str:
    """Load ``model`` with the config the cell wrote last; its EXECUTION_ENV_PATH as Triton serves it."""
    try:
        server.load(model)
    except ModelLoadError as exc:
        missing = getattr(exc, "module", "")
        raise NotYet(
            f"model {model!r} does not load"
            + (
                f": its model.py imports {missing!r}, which its stub's Python lacks."
                if missing
                else f": {exc.reason[:200]}"
            ),
            f"build one environment with {PACKAGE} and name it in the config of {' and '.join(SAYERS)}.",
            rule="not-loaded",
        ) from None
    given = server.model_config(model).get("parameters", {}).get(ENV_KEY, {}).get("string_value", "")
    if not given:
        raise NotYet(
            f"{model!r} serves without an {ENV_KEY}: it runs on the server's own Python, which the check does not judge.",
            f"leave the lab's environment as it is and give {model} the shared one.",
            rule="no-environment",
        )
    written, _ = environment(server.models, model, server.repository.read_config(model))
    if MODEL_DIR in written and ".." in written.split("/"):
        raise NotYet(
            f"the {ENV_KEY} of {model!r} is {written!r}: a path under {MODEL_DIR} that leaves the model's folder, which the "
            "python_backend README (r23.12) calls undefined behaviour.",
            "a shared environment is named by its path on the machine, the same in every config that uses it.",
            rule="escapes",
        )
    return given


def _judge(server: TritonServer) -> None:
    given = {model: _load(server, model) for model in SAYERS}
    where = {model: environment(server.models, model, server.repository.read_config(model))[1] for model in SAYERS}
    places = {str(path.resolve()) if path is not None else given[model] for model, path in where.items()}
    if len(places) > 1:
        named = "; ".join(f"{model}: {text}" for model, text in given.items())
        raise NotYet(
            f"{' and '.join(SAYERS)} run in different environments ({named}): the package is built and kept once "
            "per model.",
            "build one environment outside both model folders and give both configs its path.",
            rule="not-shared",
        )
    path = next(iter(where.values()))
    contents = read_env(path) if path is not None and path.exists() else None
    if contents is None or not contents.has_module(PACKAGE):
        raise NotYet(
            f"the environment {given['moo']} does not hold {PACKAGE}.",
            "build it with the package both import.",
            rule="package",
        )
    text = "hello from the check"
    for model, animal in SAYERS.items():
        said = infer(server, model, {"TEXT": np.array([text.encode()], dtype=object)})["SAID"].reshape(-1)[0]
        answer = said.decode() if isinstance(said, bytes) else str(said)
        if text not in answer or animal not in answer:
            raise NotYet(
                f"{model!r} answered {answer[:80]!r} for {text!r}, not its animal saying it.",
                f"keep {model}'s model.py as the notebook wrote it.",
                rule="answer",
            )
