"""The real models of examples/real_models on a real Triton 23.12, from the weights their wheels ship: the
OCR pipeline reads drawn lines, the voice detector finds spoken onsets (alone, 16 streams at once, and as
events), bad input is refused naming the input while the models keep serving, a model dropped as idle is
freed, `labkit serve` serves the folder as it is and writes nothing into it, and an environment that pip
cannot build says which model and what to do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from serve_support import LABKIT, Serve, listing
from waiting_support import eventually

import labkit
from labkit.errors import InferenceError, PythonEnvError
from labkit.lessons import real_models
from labkit.python_envs import model_envs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab():
    with labkit.start() as server:
        real_models.setup(server)
        yield server


def test_the_pipeline_reads_drawn_lines_as_well_as_the_library_itself(lab):
    drawn = real_models.pages()
    assert sum(len(lines) for _, lines in drawn) >= 20
    found = [real_models.read(lab, image) for image, _ in drawn]
    truth = [lines for _, lines in drawn]
    assert real_models.pages_accuracy(truth, found) >= 0.95
    assert [len(f) for f in found] == [len(t) for t in truth]  # one string per line, top to bottom
    env = Path(lab.model_config("ocr_rec")["parameters"]["EXECUTION_ENV_PATH"]["string_value"])
    library = real_models.rapidocr_lines(env, [image for image, _ in drawn])  # RapidOCR itself, no Triton
    assert real_models.pages_accuracy(truth, library) >= 0.9


def test_crops_are_batched_by_triton_across_one_images_requests(lab):
    before = _counts(lab, "ocr_rec")
    image = real_models.render(real_models.LINES)  # every line on one page: its crops go out at once
    assert len(real_models.read(lab, image)) == len(real_models.LINES)
    inferences, executions = (a - b for a, b in zip(_counts(lab, "ocr_rec"), before))
    assert inferences >= len(real_models.LINES) and executions < inferences


def _counts(lab, model: str) -> tuple[int, int]:
    stats = lab.stats(model)["model_stats"][0]
    return int(stats["inference_count"]), int(stats["execution_count"])


def test_every_spoken_onset_is_found_within_100_ms(lab):
    audio, truth = real_models.mixed_audio()
    found = real_models.onsets(real_models.speech_probabilities(lab, real_models.frames(audio), sequence_id=11))
    assert len(found) == len(truth)
    assert all(abs(f - t) <= 0.1 for f, t in zip(found, truth, strict=True)), (found, truth)


def test_sixteen_streams_at_once_hear_what_one_stream_hears_alone(lab):
    frames = real_models.frames(real_models.mixed_audio()[0])[:120]
    alone = real_models.speech_probabilities(lab, frames, sequence_id=21)
    heard: dict[int, np.ndarray] = {}
    before = _counts(lab, "vad")
    workers = [
        threading.Thread(
            target=lambda i=i: heard.__setitem__(i, real_models.speech_probabilities(lab, frames, 100 + i))
        )
        for i in range(16)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert sorted(heard) == list(range(16))
    for i in range(16):
        np.testing.assert_allclose(heard[i], alone, atol=1e-5)
        assert real_models.onsets(heard[i]) == real_models.onsets(alone)
    inferences, executions = (a - b for a, b in zip(_counts(lab, "vad"), before))
    assert inferences == 16 * len(frames) and executions < inferences  # streams shared executions


def test_events_stream_as_speech_starts_and_ends(lab):
    audio, truth = real_models.mixed_audio()
    events = real_models.events(lab, real_models.frames(audio), sequence_id=31)
    assert [kind for kind, _ in events] == ["start", "end"] * len(truth)
    starts = [at for kind, at in events if kind == "start"]
    assert all(abs(s - t) <= 0.1 for s, t in zip(starts, truth, strict=True)), (starts, truth)


@pytest.mark.parametrize(
    ("model", "inputs", "named"),
    [
        ("ocr", {"IMAGE": np.zeros((0, 0, 3), np.uint8)}, "IMAGE is 0x0 pixels"),
        ("ocr", {"IMAGE": np.zeros((4, 90, 3), np.uint8)}, "IMAGE is 4x90 pixels"),
        ("ocr", {"IMAGE": np.frombuffer(b"\x89PNG\r\n\x1a\n" * 8, np.uint8)}, "input 'IMAGE'"),  # a file's bytes
        ("ocr", {"IMAGE": np.zeros((20, 20, 4), np.uint8)}, "input 'IMAGE'"),
        ("ocr", {"IMAGE": np.zeros((20, 20, 3), np.float32)}, "input 'IMAGE'"),
        ("vad", {"AUDIO": np.zeros((1, 400), np.float32)}, "input 'AUDIO'"),
        ("vad", {"AUDIO": np.zeros((1, 512), np.float64)}, "input 'AUDIO'"),
    ],
)
def test_bad_input_is_refused_naming_the_input_and_the_model_keeps_serving(lab, model, inputs, named):
    options = {"sequence_id": 41, "sequence_start": True, "sequence_end": True} if model == "vad" else {}
    with pytest.raises(InferenceError) as refused:
        labkit.infer(lab, model, inputs, **options)
    assert refused.value.model == model and named in refused.value.reason
    if model == "ocr":
        image, lines = real_models.pages()[0]
        assert real_models.read(lab, image) and len(real_models.read(lab, image)) == len(lines)
    else:
        assert real_models.speech_probabilities(lab, np.zeros((2, 512), np.float32), sequence_id=42).shape == (2,)


def test_a_frame_of_no_started_sequence_is_refused_and_the_stream_after_it_serves(lab):
    with pytest.raises(InferenceError) as refused:
        labkit.infer(lab, "vad", {"AUDIO": np.zeros((1, 512), np.float32)}, sequence_id=51)
    assert refused.value.model == "vad" and "START" in refused.value.reason
    assert real_models.speech_probabilities(lab, np.zeros((3, 512), np.float32), sequence_id=51).shape == (3,)


def test_a_sequence_that_triton_drops_as_idle_is_freed_by_the_model(tmp_path):
    """vad with an idle time of 1 s: a stream left open is dropped by Triton, and the model frees its state at
    its next execute (Triton does not tell it), saying so in the log."""
    with labkit.start() as server:
        real_models.serve(server, ("vad",), progress=None)
        config = server.repository.read_config("vad")
        config.sequence_batching.max_sequence_idle_microseconds = 1_000_000
        server.repository.write_config(config)
        server.load("vad")
        labkit.infer(server, "vad", {"AUDIO": np.zeros((1, 512), np.float32)}, sequence_id=61, sequence_start=True)
        time.sleep(2.5)
        real_models.speech_probabilities(server, np.zeros((1, 512), np.float32), sequence_id=62)
        eventually(
            lambda: bool(server.logs.grep("vad: freed sequence 61, idle over 1 s")),
            "the model's line about the idle sequence",
            10,
        )
        with pytest.raises(InferenceError) as refused:  # Triton forgot it too
            labkit.infer(server, "vad", {"AUDIO": np.zeros((1, 512), np.float32)}, sequence_id=61)
        assert "START" in refused.value.reason


def test_labkit_serve_serves_the_folder_as_it_is_and_writes_nothing_into_it():
    folder = real_models.repository()
    before = listing(folder)
    serve = Serve(str(folder), "--any-ports")
    try:
        assert serve.lines["serving"].split(", ") == ["ocr", "ocr_det", "ocr_read", "ocr_rec", "vad", "vad_events"]
        serve.wait_for("environment of vad, vad_events")  # said before Triton started; read by another thread
        announced = [line.split(":")[0] for line in serve.err if line.startswith("environment of")]
        assert announced == ["environment of ocr_det, ocr_read, ocr_rec", "environment of vad, vad_events"]  # once each
        copy = Path(serve.lines["repository"].split(" (", 1)[0])
        client = httpclient.InferenceServerClient(serve.lines["http"].removeprefix("http://"))
        image, lines = real_models.pages()[1]
        tensor = httpclient.InferInput("IMAGE", list(image.shape), "UINT8")
        tensor.set_data_from_numpy(image)
        found = [t.decode() for t in client.infer("ocr", [tensor]).as_numpy("TEXT")]
        assert real_models.character_accuracy(lines, found) >= 0.95
        for name in ("ocr_det", "ocr_read", "ocr_rec", "vad", "vad_events"):
            config = json.loads(json.dumps(client.get_model_config(name)))
            env = Path(config["parameters"]["EXECUTION_ENV_PATH"]["string_value"])
            assert env.is_dir() and folder not in env.parents
        assert "EXECUTION_ENV_PATH" not in client.get_model_config("ocr").get("parameters", {})  # the ensemble
        client.close()
        assert serve.stop(signal.SIGINT).strip().endswith("stopped.")
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert serve.proc.returncode == 0 and not copy.exists()
    after = listing(folder)
    assert {k: v for k, v in after.items() if "__pycache__" not in k} == before


def test_an_environment_that_cannot_be_built_offline_names_the_model_and_what_to_do(tmp_path, monkeypatch):
    model = tmp_path / "repo" / "needs_a_package"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'backend: "python"\ninput { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }\n'
        'output { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }\n'
    )
    (model / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    )
    (model / "requirements.txt").write_text(f"labkit-offline-probe=={os.getpid()}.0\n")
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path), "PIP_CONFIG_FILE": os.devnull}
    for key, value in offline.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(PythonEnvError) as refused:
        model_envs.model_env(model / "requirements.txt", model="needs_a_package", progress=None)
    assert refused.value.problem == "pip" and refused.value.model == "needs_a_package"
    assert refused.value.path == str(model / "requirements.txt") and "No matching distribution" in refused.value.output
    done = subprocess.run(
        [*LABKIT, "serve", str(tmp_path / "repo"), "--any-ports"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 3 and "needs_a_package" in done.stderr and "package index" in done.stderr
    assert "Traceback" not in done.stderr and "http" not in done.stdout  # refused before Triton started
    assert sorted(p.name for p in model.iterdir()) == ["1", "config.pbtxt", "requirements.txt"]
