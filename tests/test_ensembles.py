"""Ensembles on a real Triton 23.12: a Python pre-process feeding a C++ model, the timeline showing
both steps of every request, the steps' statistics, and the errors for a step that cannot run."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
import labkit.errors
import labkit.repository
import labkit.server
from labkit.course.lessons import ensemble
from labkit.repository.config import to_text


@pytest.fixture(scope="module")
def lab():
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        ensemble.setup(srv)
        yield srv


def test_the_config_is_triton_text_format_with_both_steps():
    text = to_text(ensemble.CONFIG)
    assert 'platform: "ensemble"' in text and "backend" not in text and "instance_group" not in text
    parsed = labkit.repository.config.parse(text)
    steps = parsed.ensemble_scheduling.step
    assert [s.model_name for s in steps] == ["preprocess", "square"]
    assert dict(steps[0].output_map) == {"SCALED": "scaled"} and dict(steps[1].input_map) == {"IN0": "scaled"}


def test_the_pipeline_answers_through_both_steps(lab):
    assert set(ensemble.STEPS) < set(lab.loaded_models())
    result = ensemble.call(lab, np.array([255, 0, 85, 170], dtype=np.int32))
    assert result.ok
    np.testing.assert_allclose(result.result, [1.0, 0.0, (85 / 255) ** 2, (170 / 255) ** 2], rtol=1e-5)
    # a wrong answer is seen as wrong
    assert not ensemble.PipelineResult(result.raw, result.result + 0.1).ok


def test_model_stats_of_the_ensemble_carry_each_step(lab):
    before = labkit.model_stats(lab, ensemble.MODEL, settle=True)
    assert list(before.steps) == list(ensemble.STEPS)
    for _ in range(3):
        ensemble.call(lab)
    after = labkit.model_stats(lab, ensemble.MODEL, settle=True).since(before)
    assert after.success_count == 3
    assert {m: s.success_count for m, s in after.steps.items()} == {"preprocess": 3, "square": 3}
    assert after.summary()["steps"]["square"]["requests"] == 3
    assert labkit.model_stats(lab, "square").steps == {}  # not an ensemble


def test_the_timeline_shows_both_steps_of_every_request(lab):
    timeline = ensemble.record(lab, requests=8, concurrency=2)
    counts = timeline.counts()
    assert counts == {"requests": 8, "steps": {"preprocess": 8, "square": 8}, "every_request_ran_every_step": True}
    assert timeline.agrees_with_statistics()
    for request in timeline.ensemble_requests:
        pre, sq = request.steps
        assert (pre.model, sq.model) == ensemble.STEPS
        # square's request is queued when preprocess sends its response, which is before its COMPUTE_END
        assert (
            request.start <= pre.queue_start <= pre.compute_start <= sq.queue_start <= sq.compute_start <= request.end
        )
    assert len(timeline.table()) == 8 and "square_compute_ms" in timeline.table()[0]
    assert timeline.plot().png.startswith(b"\x89PNG")
    assert repr(timeline) == "<labkit ensemble timeline of pipeline: 8 requests through preprocess -> square>"


def test_a_timeline_of_a_model_that_is_not_an_ensemble_is_refused(lab):
    with pytest.raises(labkit.errors.ConfigError) as info:
        with labkit.ensemble_timeline(lab, "square"):
            pass
    assert info.value.field == "platform" and info.value.valid == ["ensemble"]


def test_labkit_timeline_of_an_ensemble_points_to_the_ensemble_timeline(lab):
    with pytest.raises(labkit.errors.ConfigError) as info:
        with labkit.timeline(lab, ensemble.MODEL):
            pass
    assert (info.value.field, info.value.value) == ("platform", "ensemble")
    assert lab.models.trace_settings(ensemble.MODEL)["trace_level"] == ["OFF"]  # tracing was never switched on


def test_a_step_naming_a_missing_model_is_refused_before_anything_is_written(lab):
    error = ensemble.missing_step_error(lab, "postprocess")
    assert isinstance(error, labkit.ModelLoadError)
    assert (error.model, error.step, error.step_model) == ("pipeline_v2", 2, "postprocess")
    assert error.problem == "not in the repository" and error.refused_by == "labkit"
    assert "preprocess" in error.available and "postprocess" not in error.available
    assert not lab.repository.model_dir("pipeline_v2").exists()


def test_a_step_mapping_a_tensor_its_model_lacks_is_refused(lab):
    cfg = labkit.ensemble_config(
        "typo",
        [("RAW", "INT32", [4])],
        [("RESULT", "FP32", [4])],
        [
            labkit.Step("preprocess", {"RAW": "RAW"}, {"SCALED": "scaled"}),
            labkit.Step("square", {"INPUT0": "scaled"}, {"OUT0": "RESULT"}),
        ],
    )
    with pytest.raises(labkit.errors.EnsembleStepError) as info:
        labkit.serve_ensemble(lab, cfg)
    assert (info.value.step, info.value.step_model, info.value.tensor) == (1, "square", "INPUT0")
    assert info.value.problem == "no such input"
    # the other side: an output the step's model does not have
    cfg.ensemble_scheduling.step[1].input_map.clear()
    cfg.ensemble_scheduling.step[1].input_map["IN0"] = "scaled"
    cfg.ensemble_scheduling.step[1].output_map.clear()
    cfg.ensemble_scheduling.step[1].output_map["OUT1"] = "RESULT"
    with pytest.raises(labkit.errors.EnsembleStepError) as info:
        labkit.serve_ensemble(lab, cfg)
    assert (info.value.tensor, info.value.problem) == ("OUT1", "no such output")


def test_triton_refusing_a_missing_step_model_becomes_an_ensemble_step_error(lab):
    cfg = labkit.ensemble_config(
        "nowhere",
        [("RAW", "INT32", [4])],
        [("RESULT", "FP32", [4])],
        [
            labkit.Step("preprocess", {"RAW": "RAW"}, {"SCALED": "scaled"}),
            labkit.Step("not_written", {"IN0": "scaled"}, {"OUT0": "RESULT"}),
        ],
    )
    lab.repository.write_config(cfg)  # written without labkit's check: Triton decides
    with pytest.raises(labkit.errors.EnsembleStepError) as info:
        lab.load("nowhere")
    error = info.value
    assert (error.model, error.step, error.step_model, error.problem) == (
        "nowhere",
        1,
        "not_written",
        "not in the repository",
    )
    assert error.refused_by == "triton" and error.reason  # Triton's own words are kept
    assert "pipeline" in error.serving and "nowhere" not in lab.loaded_models()


def test_triton_refusing_a_step_model_that_does_not_load_names_it(lab):
    lab.repository.write_config(
        labkit.model_config("broken_step", "python", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])])
    )
    lab.repository.write_python_model(
        "broken_step", "class TritonPythonModel:\n    def initialize(self, args):\n        raise ValueError('no')\n"
    )
    cfg = labkit.ensemble_config(
        "via_broken",
        [("RAW", "INT32", [4])],
        [("RESULT", "FP32", [4])],
        [
            labkit.Step("preprocess", {"RAW": "RAW"}, {"SCALED": "scaled"}),
            labkit.Step("broken_step", {"IN0": "scaled"}, {"OUT0": "RESULT"}),
        ],
    )
    labkit.repository.ensemble_config.check_steps(lab.repository, cfg)  # labkit's check passes: the model is there
    with pytest.raises(labkit.errors.EnsembleStepError) as info:
        labkit.serve_ensemble(lab, cfg)
    assert (info.value.step, info.value.step_model, info.value.problem) == (1, "broken_step", "did not load")
    assert info.value.refused_by == "triton"
    # the pipeline still serves
    assert ensemble.call(lab).ok


def test_serve_ensemble_refuses_a_config_that_is_not_an_ensemble(lab):
    with pytest.raises(labkit.errors.ConfigError) as info:
        labkit.serve_ensemble(lab, ensemble.SQUARE_CONFIG)
    assert info.value.field == "platform"


def test_the_lesson_runs(lab):
    outcome = ensemble.run(lab)
    assert outcome.ok, outcome.record
    assert outcome.record["steps"] == {"preprocess": 6, "square": 6}


def test_notebooks_09_and_16_write_the_lessons_sources_from_their_cells():
    import json
    from pathlib import Path

    from labkit.course.lessons import custom_metrics

    folder = Path(__file__).resolve().parents[1] / "notebooks"
    cells = [
        "".join(c["source"])
        for name in ("09_state_ensembles_metrics.ipynb", "16_custom_metrics.ipynb")
        for c in json.loads((folder / name).read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    bodies = {cell.split("\n", 1)[0]: cell.split("\n", 1)[1] + "\n" for cell in cells if cell.startswith("%%triton_")}
    lessons = {
        "%%triton_python preprocess": ensemble.PRE_SOURCE,
        "%%triton_cpp square": ensemble.SQUARE_SOURCE,
        "%%triton_python metered": custom_metrics.SOURCE,
    }
    assert {magic: bodies.get(magic) for magic in lessons} == lessons  # the stateful section's cells are its own
