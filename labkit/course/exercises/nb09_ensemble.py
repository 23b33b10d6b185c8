"""The exercise of notebook 09's ensemble section: an ensemble that runs one model as two of its steps.

The check judges the ensemble Triton serves by what it answers and by what its steps did: the values of
RESULT for inputs of its own, and Triton's statistics of the step models over those requests (square
must run twice per request, preprocess once), so an ensemble written in any order, with any names for
its inner tensors, or nesting the lesson's pipeline, is right, and one that computes the power some other
way is not. A config written but refused by Triton leaves the one before it serving: the check compares
the two and says so.
"""

from __future__ import annotations

import numpy as np

from ...client.inference import infer
from ...observe.stats import model_stats
from ...server.base import TritonServer
from .core import NotYet, exercise, require_configured_outputs

ENSEMBLE = "fourth_power"
PREPROCESS, SQUARE = "preprocess", "square"
RAW = [np.array(v, np.int32) for v in ([0, 51, 102, 255], [255, 128, 10, 200], [17, 34, 85, 170])]


def _rounded(values: np.ndarray) -> list[float]:
    return [float(f"{v:.6g}") for v in values.tolist()]


def _steps_written(server: TritonServer) -> list[tuple]:
    config = server.repository.read_config(ENSEMBLE)
    return sorted(
        (s.model_name, sorted(s.input_map.items()), sorted(s.output_map.items()))
        for s in config.ensemble_scheduling.step
    )


def _steps_served(config: dict) -> list[tuple]:
    return sorted(
        (s["model_name"], sorted(s.get("input_map", {}).items()), sorted(s.get("output_map", {}).items()))
        for s in config.get("ensemble_scheduling", {}).get("step", [])
    )


@exercise("09-fourth-power")
def fourth_power(server: TritonServer) -> None:
    if ENSEMBLE not in server.loaded_models():
        raise NotYet(
            f"model {ENSEMBLE!r} is not loaded.",
            "write its config, then lab.load it (the cell does both).",
            rule="setup",
        )
    served = server.model_config(ENSEMBLE)
    if served.get("platform") != "ensemble":
        raise NotYet(
            f"{ENSEMBLE} is not an ensemble (its platform is {served.get('platform')!r}, backend "
            f"{served.get('backend')!r}).",
            "build its config with labkit.ensemble_config.",
            rule="not-ensemble",
        )
    if _steps_written(server) != _steps_served(served):
        raise NotYet(
            f"the config of {ENSEMBLE} written last is not the one Triton serves: its load failed (or it was not "
            f"loaded since), and the ensemble before it still serves.",
            f"run lab.load({ENSEMBLE!r}) and read Triton's reason.",
            rule="stale",
        )
    before = {m: model_stats(server, m, settle=True).success_count for m in (PREPROCESS, SQUARE)}
    for raw in RAW:
        shown = f" (for RAW={raw.tolist()})"
        out = infer(server, ENSEMBLE, {"RAW": raw})
        require_configured_outputs(server, ENSEMBLE, out, shown=shown)
        got, scaled = out["RESULT"], (raw / 255.0).astype(np.float32)
        if not np.allclose(got, scaled**4, rtol=1e-4, atol=1e-7):
            power = next(
                (
                    f" (that is scaled to the power {p})"
                    for p in (1, 2, 3, 8)
                    if np.allclose(got, scaled**p, rtol=1e-4, atol=1e-7)
                ),
                "",
            )
            raise NotYet(
                f"RESULT was {_rounded(got)}{shown}, not (RAW / 255) to the fourth power, "
                f"{_rounded(scaled**4)}{power}.",
                rule="values",
            )
    ran = {m: model_stats(server, m, settle=True).success_count - before[m] for m in (PREPROCESS, SQUARE)}
    if ran[SQUARE] != 2 * len(RAW) or ran[PREPROCESS] != len(RAW):
        raise NotYet(
            f"the values are right, but for {len(RAW)} requests to {ENSEMBLE} Triton counted {ran[PREPROCESS]} "
            f"request(s) to {PREPROCESS} and {ran[SQUARE]} to {SQUARE}: the ensemble should run {PREPROCESS} once "
            f"and {SQUARE} twice per request.",
            rule="steps",
        )
