"""The real models of ``examples/real_models`` (PP-OCRv4 and silero-vad, weights from their wheels): how a
server gets them, how the lesson, the bench and the tests talk to them, and the runtime alone (onnxruntime
in the models' own environment, no Triton) to measure Triton against. The data they are fed and how their
answers are scored live in ``real_models_data`` and are named here too."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...client.inference import infer
from ...errors import InferenceError, SetupError
from ...python_envs import model_envs
from ...server.base import TritonServer
from ...traffic.generator import run_load
from ...traffic.sequences import run_sequences
from ..catalogue import REAL_MODELS_IN_IMAGES
from .outcome import Outcome
from .real_models_data import (  # the lesson's data, under this module's name too
    CROP_SHAPE,
    FONTS,
    FRAME,
    FRAMES_PER_SECOND,
    LINES,
    RATE,
    SPOKEN,
    character_accuracy,
    crops,
    events_of,
    frames,
    mixed_audio,
    onsets,
    pages,
    pages_accuracy,
    render,
    speech,
)

# Where the models are, by one rule: a checkout's examples/real_models when labkit runs from a checkout (the folder
# beside the package), else where labkit's lab and grader images put it (labkit.room.hub.lab_models).
CHECKOUT_REPOSITORY = Path(__file__).resolve().parents[3] / "examples" / "real_models"
IMAGE_REPOSITORY = Path(REAL_MODELS_IN_IMAGES)
REPOSITORY = CHECKOUT_REPOSITORY if CHECKOUT_REPOSITORY.is_dir() else IMAGE_REPOSITORY
OCR_MODELS = ("ocr", "ocr_det", "ocr_read", "ocr_rec")
VAD_MODELS = ("vad", "vad_events")

__all__ = [
    "character_accuracy",
    "CROP_SHAPE",
    "crops",
    "events",
    "events_of",
    "FONTS",
    "FRAME",
    "frames",
    "FRAMES_PER_SECOND",
    "LINES",
    "measure",
    "mixed_audio",
    "OCR_MODELS",
    "onsets",
    "pages",
    "pages_accuracy",
    "rapidocr_lines",
    "RATE",
    "read",
    "recognizer_inprocess",
    "render",
    "REPOSITORY",
    "repository",
    "run",
    "run_in_env",
    "serve",
    "setup",
    "speech",
    "speech_probabilities",
    "SPOKEN",
    "vad_inprocess",
    "VAD_MODELS",
]


def repository() -> Path:
    """The real models' repository, REPOSITORY: a checkout's ``examples/real_models``, else the one in labkit's
    lab and grader images (the models are the lesson's files, not the package's data)."""
    if not (REPOSITORY / "ocr" / "config.pbtxt").is_file():
        raise SetupError(
            needed_by="The real models' lesson",
            missing=str(REPOSITORY),
            reason="no checkout",
            detail=(
                f"the models are neither in a checkout of labkit ({CHECKOUT_REPOSITORY}) nor where labkit's lab "
                f"image holds them ({IMAGE_REPOSITORY})"
            ),
            remedy=(
                "Run the lesson from a clone of labkit (its examples/real_models), or in a lab of labkit's image "
                "(`labkit room image` builds it)"
            ),
        )
    return REPOSITORY


def serve(
    server: TritonServer,
    models: Sequence[str] = OCR_MODELS + VAD_MODELS,
    progress: Callable[[str], None] | None = print,
) -> dict[str, Path]:
    """Copy the real models into the server's repository, each Python model given the environment built from
    its requirements.txt (once, into labkit's cache), and load ``models``; the environments by model."""
    envs = model_envs.envs_for(repository(), progress=progress)
    model_envs.copy_with_envs(server.repository, repository(), envs)
    for name in models:
        server.load(name)
    return envs


def setup(server: TritonServer) -> dict[str, Path]:
    """Every real model served (see ``serve``), quietly: the lesson's and the tests' start."""
    return serve(server, progress=None)


def read(server: TritonServer, image: np.ndarray) -> list[str]:
    """The lines of text the ``ocr`` pipeline finds in ``image``, top to bottom."""
    return [line.decode() for line in infer(server, "ocr", {"IMAGE": image})["TEXT"]]


def speech_probabilities(server: TritonServer, audio_frames: np.ndarray, sequence_id: int) -> np.ndarray:
    """``vad``'s probability of speech for each frame, sent as one sequence."""
    last = len(audio_frames) - 1
    return np.array(
        [
            infer(
                server,
                "vad",
                {"AUDIO": frame[None]},
                sequence_id=sequence_id,
                sequence_start=step == 0,
                sequence_end=step == last,
            )["SPEECH"][0, 0]
            for step, frame in enumerate(audio_frames)
        ]
    )


def events(
    server: TritonServer,
    audio_frames: np.ndarray,
    sequence_id: int,
    timeout_s: float = 60,
    parameters: Mapping[str, str | int | bool] | None = None,
) -> list[tuple]:
    """``vad_events``' events for the frames sent as one sequence over a gRPC stream: (kind, seconds) each, in
    the order of their times (a decoupled model's responses to different requests may arrive in another
    order). ``parameters``: each request's own parameters (tritonclient's), if any."""
    import queue

    import tritonclient.grpc as grpcclient

    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.endpoints.grpc_url)
    found: list[tuple] = []
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        last = len(audio_frames) - 1
        for step, frame in enumerate(audio_frames):
            tensor = grpcclient.InferInput("AUDIO", [1, FRAME], "FP32")
            tensor.set_data_from_numpy(frame[None].astype(np.float32))
            client.async_stream_infer(
                "vad_events",
                [tensor],
                sequence_id=sequence_id,
                sequence_start=step == 0,
                sequence_end=step == last,
                enable_empty_final_response=True,
                parameters=parameters,
            )
        finals = 0
        while finals < len(audio_frames):
            try:
                result, error = answers.get(timeout=timeout_s)
            except queue.Empty:
                raise InferenceError(
                    model="vad_events",
                    happened=(
                        f"stopped after {finals} of {len(audio_frames)} final responses (nothing more for "
                        f"{timeout_s:g} s)"
                    ),
                    reason="no final response",
                    remedy="Read the server's log (lab.logs.tail()) for its execute's error",
                ) from None
            if error is not None:
                raise InferenceError(
                    model="vad_events", happened="failed in its stream", reason=error.message()
                ) from None
            if result.get_response().parameters["triton_final_response"].bool_param:
                finals += 1
            if result.as_numpy("EVENT") is not None:
                kind, at = result.as_numpy("EVENT")[0, 0].decode(), float(result.as_numpy("TIME")[0, 0])
                found.append((kind, round(at, 3)))
    finally:
        client.stop_stream()
        client.close()
    return sorted(found, key=lambda event: event[1])


def run(server: TritonServer) -> Outcome:
    """The lesson's two claims on ``server`` (after ``setup``): the pipeline reads the drawn lines at a
    character accuracy of at least 0.95, and every spoken onset is found within 100 ms."""
    drawn = pages()
    accuracy = pages_accuracy([lines for _, lines in drawn], [read(server, image) for image, _ in drawn])
    audio, truth = mixed_audio()
    found = onsets(speech_probabilities(server, frames(audio), sequence_id=1))
    late = [min((abs(f - t) for f in found), default=float("inf")) for t in truth]
    ok = accuracy >= 0.95 and max(late) <= 0.1
    return Outcome(ok, {"ocr_accuracy": round(accuracy, 3), "onsets_s": found, "worst_onset_error_s": max(late)})


# --- the runtime alone, in the models' own environment --------------------------------------------------------


def run_in_env(env: Path, script: str, arrays: dict[str, np.ndarray] | None = None, timeout_s: float = 600) -> Any:
    """Run ``script`` with the environment's own Python (its onnxruntime, its library), without Triton:
    it finds ``arrays`` in ``np.load(ARRAYS)`` and assigns its answer (JSON) to ``RESULT``."""
    with tempfile.TemporaryDirectory(prefix="labkit-env-run-") as work:
        np.savez(Path(work) / "in.npz", **(arrays or {}))
        program = (
            f"import json, numpy as np\nARRAYS = {str(Path(work) / 'in.npz')!r}\nRESULT = None\n{script}\n"
            f"open({str(Path(work) / 'out.json')!r}, 'w').write(json.dumps(RESULT))\n"
        )
        try:
            done = subprocess.run(
                [str(env / "bin" / "python"), "-c", program], capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            raise SetupError(
                needed_by="The measurement",
                missing=str(env),
                reason="timed out",
                detail=f"it ran past {timeout_s:g} s and was stopped",
                remedy=f"Run it again with fewer inputs, or from run_in_env with a timeout_s over {timeout_s:g}",
            ) from None
        if done.returncode != 0:
            raise SetupError(
                needed_by="The measurement",
                missing=str(env),
                reason="script failed",
                detail=done.stderr[-1500:],
                remedy=f"Check that {env} holds the packages the measurement imports (its Python's error says which)",
            )
        return json.loads((Path(work) / "out.json").read_text())


_RAPIDOCR = """
from rapidocr_onnxruntime import RapidOCR
engine = RapidOCR()
loaded = np.load(ARRAYS)
RESULT = []
for key in sorted(loaded.files, key=int):
    found, _ = engine(np.ascontiguousarray(loaded[key][:, :, ::-1]))
    RESULT.append([text for _, text, _ in found or []])
"""


def rapidocr_lines(env: Path, images: Sequence[np.ndarray]) -> list[list[str]]:
    """What the library's own ``RapidOCR`` (defaults) reads in each image, run in the models' environment."""
    return run_in_env(env, _RAPIDOCR, {str(i): image for i, image in enumerate(images)})


_RECOGNIZER = """
import time, onnxruntime, rapidocr_onnxruntime
from pathlib import Path
threads, batch, seconds = {threads}, {batch}, {seconds}
options = onnxruntime.SessionOptions()
options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
weights = Path(rapidocr_onnxruntime.__file__).parent / "models" / "ch_PP-OCRv4_rec_infer.onnx"
session = onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
crops = np.load(ARRAYS)["crops"][:batch]
session.run(None, {{"x": crops}})
done, began = 0, time.perf_counter()
while time.perf_counter() - began < seconds:
    session.run(None, {{"x": crops}})
    done += len(crops)
RESULT = done / (time.perf_counter() - began)
"""


def recognizer_inprocess(env: Path, crops: np.ndarray, threads: int, batch: int = 8, seconds: float = 3.0) -> float:
    """Crops per second of PP-OCRv4's recognizer in onnxruntime alone (``threads`` intra-op threads, as the
    served model), on batches of ``batch`` of the given crops."""
    script = _RECOGNIZER.format(threads=threads, batch=batch, seconds=seconds)
    return float(run_in_env(env, script, {"crops": crops.astype(np.float32)}))


_VAD = """
import time, importlib.util, onnxruntime
from pathlib import Path
threads, batch, seconds = {threads}, {batch}, {seconds}
options = onnxruntime.SessionOptions()
options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
weights = Path(importlib.util.find_spec("silero_vad").submodule_search_locations[0]) / "data" / "silero_vad.onnx"
session = onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
frames = np.load(ARRAYS)["frames"]
state = np.zeros((2, batch, 128), np.float32)
rate = np.array(16000, np.int64)
done, began, row = 0, time.perf_counter(), 0
while time.perf_counter() - began < seconds:
    chunk = np.repeat(np.concatenate([np.zeros(64, np.float32), frames[row % len(frames)]])[None], batch, axis=0)
    _, state = session.run(None, {{"input": chunk, "state": state, "sr": rate}})
    done, row = done + batch, row + 1
RESULT = done / (time.perf_counter() - began)
"""


def vad_inprocess(env: Path, audio_frames: np.ndarray, threads: int, batch: int = 16, seconds: float = 3.0) -> float:
    """Frames per second of silero-vad in onnxruntime alone, ``batch`` streams a run (as vad's batches)."""
    script = _VAD.format(threads=threads, batch=batch, seconds=seconds)
    return float(run_in_env(env, script, {"frames": audio_frames.astype(np.float32)}))


# --- Triton against the runtime alone ----------------------------------------------------------------------


def _median_rounds(first: Callable[[], float], second: Callable[[], float], rounds: int) -> tuple[float, float]:
    """Medians of ``first`` and ``second`` over rounds that alternate them (a small machine drifts)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(first())
        b.append(second())
    return statistics.median(a), statistics.median(b)


def _threads(server: TritonServer, model: str) -> int:
    return int(server.model_config(model)["parameters"]["intra_op_num_threads"]["string_value"])


def measure(server: TritonServer, envs: dict[str, Path], rounds: int = 3, seconds: float = 3.0) -> dict[str, float]:
    """ocr_rec and vad (served, with ``envs``) through Triton against onnxruntime alone in the same
    environment and with the same threads, medians of ``rounds`` alternating rounds of ``seconds`` each.
    The recognizer in crops per second: in-process on batches of 8; through Triton, single-crop requests
    from labkit's load generator at concurrency 1, 4 and 8 with dynamic batching (preferred batch 8) and
    without it (ocr_rec is reloaded, then restored). The voice detector in real-time 16 kHz streams (frames
    per second / 31.25): its batch of streams through Triton, and the same batch in-process."""
    threads, crop_rows = _threads(server, "ocr_rec"), crops()

    def triton(concurrency: int) -> float:
        inputs = lambda i: {"CROP": crop_rows[i % len(crop_rows)][None]}  # noqa: E731
        return run_load(
            server, "ocr_rec", inputs, requests=10**9, concurrency=concurrency, duration_s=seconds
        ).throughput

    triton(8)  # warm-up
    alone, batched = _median_rounds(
        lambda: recognizer_inprocess(envs["ocr_rec"], crop_rows, threads, 8, seconds), lambda: triton(8), rounds
    )
    out: dict[str, float] = {"ocr_threads": threads, "ocr_inprocess_batch8_cps": round(alone, 1)}
    out.update({f"ocr_triton_c{c}_cps": round(triton(c), 1) for c in (1, 4)}, ocr_triton_c8_cps=round(batched, 1))
    out["ocr_batch8_ratio"] = round(batched / alone, 3)
    config = server.repository.read_config("ocr_rec")
    unbatched = type(config)()
    unbatched.CopyFrom(config)
    unbatched.ClearField("dynamic_batching")
    server.repository.write_config(unbatched)
    server.load("ocr_rec")
    try:
        out.update({f"ocr_triton_c{c}_unbatched_cps": round(triton(c), 1) for c in (1, 4, 8)})
    finally:
        server.repository.write_config(config)
        server.load("ocr_rec")
    audio = frames(mixed_audio()[0])
    streams = int(server.model_config("vad")["max_batch_size"])

    def served() -> float:
        inputs = lambda seq, step: {"AUDIO": audio[step % len(audio)][None]}  # noqa: E731
        return run_sequences(server, "vad", inputs, concurrency=streams, length=len(audio)).throughput

    through, inproc = _median_rounds(
        served, lambda: vad_inprocess(envs["vad"], audio, _threads(server, "vad"), streams, seconds), rounds
    )
    out["vad_streams_per_batch"] = streams
    out["vad_realtime_streams"] = round(through / FRAMES_PER_SECOND, 1)
    out["vad_inprocess_realtime_streams"] = round(inproc / FRAMES_PER_SECOND, 1)
    return out
