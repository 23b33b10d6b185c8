"""What an exercise is, and how a check answers: one line, passed or what is wrong plus a hint.

An exercise's check runs the person's model on the real server with inputs the check chooses, and
raises NotYet(problem, hint) when something is wrong. ``check()`` turns every outcome (NotYet, a labkit
error such as a model that is not loaded, or any exception from the person's code) into a Verdict:
never a traceback. When ``LABKIT_WORKSHOP_REPORT`` names a file (``labkit workshop check`` sets it),
each verdict is also appended to it as a JSON line.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from tritonclient.utils import triton_to_np_dtype

from ...errors import LabkitError, OptionError
from ...server.base import TritonServer
from ..catalogue import REGISTRY, Verdict

REPORT_ENV = "LABKIT_WORKSHOP_REPORT"


class NotYet(Exception):
    """Raised by a check: ``problem`` says what is wrong (with the inputs that showed it), ``hint`` how to go on,
    ``rule`` a short name of the rule that failed (tests assert on it, not on the words)."""

    def __init__(self, problem: str, hint: str = "", *, rule: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint
        self.rule = rule


@dataclass(frozen=True)
class Check:
    """How an exercise of the catalogue is judged: ``verify(server, **answer)`` raises NotYet unless the
    person's work is right; ``sources`` the models or backends whose latest cell it judges (``require_latest``)."""

    verify: Callable[..., None]
    sources: tuple[str, ...] = ()


#: The check of every exercise, by the catalogue's id (labkit.course.catalogue holds what each exercise is),
#: as its module registers it (``checks_of`` imports the modules).
CHECKS: dict[str, Check] = {}
#: The check modules, one per notebook (09 has two). Each is imported when a check of its notebook is first
#: asked for: a check cell imports its own notebook's checks, not every notebook's (matplotlib, the native
#: builds, ...: a third of a core-second in each grader run).
MODULES: tuple[str, ...] = ("nb01", "nb02", "nb03", "nb04", "nb05", "nb06", "nb07", "nb09_ensemble", "nb09_state")
MODULES += ("nb11", "nb12", "nb15", "nb17", "nb18")


def checks_of(exercise_id: str = "") -> dict[str, Check]:
    """CHECKS, once the modules of ``exercise_id``'s notebook (its id's number) registered; every module's for ""
    or for a check kept in another notebook's module (14-scale's, in nb02's, beside the backend it builds on)."""
    prefix = f"nb{exercise_id.split('-')[0]}" if exercise_id else "nb"
    for name in MODULES:
        if name.startswith(prefix):
            importlib.import_module(f"{__package__}.{name}")
    if exercise_id and exercise_id not in CHECKS:
        return checks_of()
    return CHECKS


def exercise(id: str, *, sources: tuple[str, ...] = ()) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``verify`` as the check of the catalogue's exercise ``id``. ``sources`` names the models or
    backends whose cells the exercise is about: before ``verify`` runs, ``require_latest`` checks each."""

    def register(verify: Callable[..., None]) -> Callable[..., None]:
        if id not in REGISTRY:
            raise OptionError(option="id", value=id, valid="the id of an exercise in labkit.course.catalogue")
        if id in CHECKS:
            raise OptionError(
                option="id", value=id, valid="an exercise's id not registered yet (this one has its check)"
            )
        CHECKS[id] = Check(verify, tuple(sources))
        return verify

    return register


def require_latest(server: TritonServer, *names: str) -> None:
    """Raise NotYet when the latest source written for any of ``names`` (a model or a backend, as a
    ``%%triton_python`` / ``%%triton_cpp`` cell or ``python_model``/``python_backend``/``cpp_backend``
    named it) did not build or did not load: the previous version may still be serving, and judging
    it would judge old code. Names never written through labkit pass (nothing to say about them)."""
    for name in names:
        attempt = server.models.attempts.get(name)
        if attempt is None or attempt.serving:
            continue
        what = "build" if not attempt.built else "load"
        raise NotYet(
            f"your latest {name} cell did not {what}: {attempt.error}",
            f"fix it and run the {name} cell again; until then Triton serves the version before it.",
            rule=what,
        )


def reload_with(server: TritonServer, model: str, **parameters: object) -> None:
    """Set string parameters in ``model``'s config and load it again with a new model state (the
    backend's ModelInitialize runs again; a config-only change may be applied in place)."""
    config = server.repository.read_config(model)
    for key, value in parameters.items():
        config.parameters[key].string_value = str(value)
    server.repository.write_config(config)
    server.repository.mark_changed(model)
    server.load(model)


def require_configured_outputs(
    server: TritonServer,
    model: str,
    outputs: Mapping[str, np.ndarray],
    rows: int | None = None,
    shown: str = "",
    named: str = "",
) -> None:
    """Raise NotYet unless every output the config of ``model`` declares came back with the config's
    datatype and shape (as Triton returned them: ``outputs`` from labkit.infer). ``rows``: the batch
    dimension the request had, for a model with max_batch_size > 0. ``shown`` names the inputs sent; ``named``
    the model as the person knows it, when ``model`` is a check's copy of it."""
    config = server.model_config(model)
    batched = int(config.get("max_batch_size", 0)) > 0
    for spec in config.get("output", []):
        name = spec["name"]
        dims = [int(d) for d in spec["dims"]]
        wanted = ([rows] if batched else []) + dims
        if name not in outputs:
            raise NotYet(
                f"the answer has no {name}{shown}; it has {', '.join(sorted(outputs)) or 'no outputs'}.",
                rule="missing-output",
            )
        got = outputs[name]
        dtype = np.dtype(triton_to_np_dtype(spec["data_type"].removeprefix("TYPE_")))
        if got.dtype != dtype:
            raise NotYet(
                f"{name} came back as {got.dtype}{shown}; the config of {named or model} says "
                f"{spec['data_type'].removeprefix('TYPE_')} ({dtype}).",
                f"a tensor keeps its array's dtype: give pb_utils.Tensor an array of dtype {dtype}, the config's datatype "
                "(python_backend README, r23.12: https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md#execute).",
                rule="dtype",
            )
        if len(got.shape) != len(wanted) or any(w not in (-1, None, g) for w, g in zip(wanted, got.shape)):
            expected = [("any" if w in (-1, None) else w) for w in wanted]
            raise NotYet(
                f"{name} came back with shape {list(got.shape)}{shown}; the config of {named or model} says {expected}.",
                "return an array of exactly the configured shape (no extra axis).",
                rule="shape",
            )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def check(exercise_id: str, server: TritonServer, **answer: Any) -> Verdict:
    """Check exercise ``exercise_id`` against ``server``; ``answer`` carries values the exercise asks
    for (e.g. ``delay_us=...``). Prints nothing; the Verdict's repr is its one line."""
    if exercise_id not in REGISTRY:
        known = ", ".join(sorted(REGISTRY))
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are: {known}")
    item, judge = REGISTRY[exercise_id], checks_of(exercise_id)[exercise_id]
    try:
        require_latest(server, *judge.sources)
        judge.verify(server, **answer)
        verdict = Verdict(exercise_id, True)
    except NotYet as exc:
        verdict = Verdict(exercise_id, False, exc.problem, exc.hint or item.hint, exc.rule)
    except LabkitError as exc:  # e.g. the model is not loaded, or the request failed: its first line says why
        verdict = Verdict(exercise_id, False, _first_line(str(exc)), item.hint)
    except Exception as exc:  # noqa: BLE001 - the person's code may raise anything; say what, not where
        verdict = Verdict(exercise_id, False, f"{type(exc).__name__}: {_first_line(str(exc))}", item.hint)
    report = os.environ.get(REPORT_ENV)
    if report:
        with open(report, "a") as handle:
            handle.write(json.dumps(asdict(verdict)) + "\n")
    return verdict
