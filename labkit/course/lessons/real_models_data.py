"""The real-model lesson's data, made here and scored here: lines of text drawn with Pillow in real fonts
(and made into what the recognizer takes), speech spoken by espeak-ng and placed in noise at known times, and
how answers are scored (character accuracy; the events and onsets a stream's probabilities give)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import wave
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ...errors import SetupError

RATE, FRAME = 16000, 512  # silero-vad: 16 kHz, 32 ms frames
FRAMES_PER_SECOND = RATE / FRAME  # 31.25: one real-time stream
CROP_SHAPE = (3, 48, 320)  # ocr_rec's CROP

FONTS = {
    "DejaVu Sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "Liberation Serif": "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
    "Liberation Mono": "/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf",
}
LINES = (
    "labkit OCR lesson",
    "Triton 23.12 serves it",
    "invoice 4711 due 2026",
    "dynamic batching",
    "sequence batcher",
    "python backend",
    "model repository",
    "ensemble and BLS",
    "weights from a wheel",
    "order 90210 shipped",
    "hello world 42",
    "concurrency 8",
    "the quick brown fox",
    "jumps over 13 dogs",
    "room 101 at 09:00",
    "voice activity",
    "character accuracy",
    "onnxruntime on CPU",
    "page 7 of 12",
    "total 3580 EUR",
    "batch size eight",
    "queue delay 5 ms",
    "seven streams",
    "version 2.41.0",
)
SPOKEN = ("hello this is labkit", "Triton serves a voice detector", "one two three four five")


# --- text, drawn -------------------------------------------------------------------------------------------


def render(lines: Sequence[str], font: str = "DejaVu Sans", size: int = 28) -> np.ndarray:
    """``lines`` drawn black on white with Pillow, one under the other: an RGB image (height, width, 3)."""
    from PIL import Image, ImageDraw, ImageFont

    path = FONTS.get(font, font)
    if not Path(path).is_file():
        raise SetupError(
            needed_by="The lesson's pictures",
            missing=path,
            reason="no font",
            remedy="install Debian's fonts-dejavu-core and fonts-liberation (apt-get install fonts-dejavu-core fonts-liberation)",
        )
    face = ImageFont.truetype(path, size)
    step = size + 16
    width = max(int(face.getlength(line)) for line in lines) + 40
    image = Image.new("RGB", (width, step * len(lines) + 20), "white")
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((20, 10 + row * step), line, font=face, fill="black")
    return np.asarray(image)


def pages(lines: Sequence[str] = LINES, per_page: int = 3) -> list[tuple[np.ndarray, list[str]]]:
    """``lines`` drawn ``per_page`` to an image, the fonts taking turns: (image, its lines) each."""
    fonts = list(FONTS)
    return [
        (render(lines[i : i + per_page], fonts[(i // per_page) % len(fonts)]), list(lines[i : i + per_page]))
        for i in range(0, len(lines), per_page)
    ]


def crops(lines: Sequence[str] = LINES, font: str = "DejaVu Sans") -> np.ndarray:
    """Each line drawn alone and made into what ocr_rec takes ([n, 3, 48, 320]: 48 high, scaled to [-1, 1],
    padded with 0), as ocr_read makes its crops."""
    from PIL import Image

    _, height, width = CROP_SHAPE
    out = np.zeros((len(lines), *CROP_SHAPE), np.float32)
    for row, line in enumerate(lines):
        image = Image.fromarray(render([line], font)[:, :, ::-1])  # BGR, as ocr_read hands them on
        fitted = min(width, int(np.ceil(height * image.width / image.height)))
        pixels = np.asarray(image.resize((fitted, height), Image.Resampling.BILINEAR), np.float32)
        out[row, :, :, :fitted] = (pixels.transpose(2, 0, 1) / 255 - 0.5) / 0.5
    return out


def _squeezed(text: str) -> str:
    return "".join(text.split()).lower()


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (written here: a dozen lines, not worth a package)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def character_accuracy(truth: Iterable[str], found: Iterable[str]) -> float:
    """1 - edits / characters of the truth, spaces and case ignored (PP-OCR drops some spaces), with the
    lines of each side read in order as one text."""
    a, b = _squeezed("".join(truth)), _squeezed("".join(found))
    return max(0.0, 1 - _edits(a, b) / max(len(a), 1))


def pages_accuracy(truths: Sequence[Sequence[str]], founds: Sequence[Sequence[str]]) -> float:
    """Character accuracy over several pages: all their edits over all their characters."""
    edits = sum(_edits(_squeezed("".join(t)), _squeezed("".join(f))) for t, f in zip(truths, founds, strict=True))
    return max(0.0, 1 - edits / max(sum(len(_squeezed("".join(t))) for t in truths), 1))


# --- speech, spoken ----------------------------------------------------------------------------------------


def speech(text: str, voice: str = "en") -> np.ndarray:
    """``text`` spoken by espeak-ng at 16 kHz (float32 in [-1, 1]), its leading and trailing silence cut."""
    if shutil.which("espeak-ng") is None:
        raise SetupError(
            needed_by="The lesson's test audio",
            missing="espeak-ng",
            reason="not installed",
            remedy="apt-get install espeak-ng (it speaks the lesson's test audio offline)",
        )
    with tempfile.NamedTemporaryFile(suffix=".wav") as out:
        spoken = subprocess.run(["espeak-ng", "-v", voice, "-w", out.name, text], capture_output=True, text=True)
        if spoken.returncode != 0:
            raise SetupError(
                needed_by=f"Speaking {text!r}",
                missing=f"espeak-ng voice {voice}",
                reason="espeak-ng failed",
                detail=spoken.stderr.strip()[-300:],
                remedy=f"check that espeak-ng has the voice {voice!r} (espeak-ng --voices)",
            )
        with wave.open(out.name) as wav:
            rate = wav.getframerate()
            samples = np.frombuffer(wav.readframes(wav.getnframes()), np.int16).astype(np.float32) / 32768
    times = np.arange(int(len(samples) * RATE / rate)) / RATE
    audio = np.interp(times, np.arange(len(samples)) / rate, samples).astype(np.float32)
    loud = np.flatnonzero(np.abs(audio) > 0.02)
    return audio[loud[0] : loud[-1] + 1]


def mixed_audio(
    texts: Sequence[str] = SPOKEN,
    starts_s: Sequence[float] = (1.0, 4.5, 8.0),
    seconds: float = 11.5,
    noise: float = 0.003,
    seed: int = 0,
) -> tuple[np.ndarray, list[float]]:
    """Speech placed in noise at known times: the audio (16 kHz, whole frames) and each onset in seconds."""
    audio = np.random.default_rng(seed).normal(0, noise, int(seconds * RATE)).astype(np.float32)
    for text, start in zip(texts, starts_s, strict=True):
        clip = speech(text)
        at = int(start * RATE)
        audio[at : at + len(clip)] += clip[: len(audio) - at]
    return audio[: len(audio) // FRAME * FRAME], list(starts_s)


def frames(audio: np.ndarray) -> np.ndarray:
    """The audio as silero's frames: [n, 512]."""
    return audio[: len(audio) // FRAME * FRAME].reshape(-1, FRAME)


def events_of(probabilities: Iterable[float], threshold: float = 0.5, min_silence_ms: float = 250) -> list[tuple]:
    """Speech events from a stream's probabilities, as vad_events decides them: ("start", seconds) at a frame at
    ``threshold`` or above after silence, ("end", seconds) at the first of ``min_silence_ms`` of frames below
    threshold - 0.15 (silero's own hysteresis), and an end at the last frame if speech is still on."""
    found: list[tuple] = []
    speaking, quiet, index = False, 0, -1
    quiet_frames = max(1, round(min_silence_ms / 1000 / (FRAME / RATE)))
    for index, p in enumerate(probabilities):
        if not speaking and p >= threshold:
            speaking, quiet = True, 0
            found.append(("start", round(index * FRAME / RATE, 3)))
        elif speaking:
            quiet = quiet + 1 if p < threshold - 0.15 else 0
            if quiet >= quiet_frames:
                speaking = False
                found.append(("end", round((index - quiet + 1) * FRAME / RATE, 3)))
    if speaking:
        found.append(("end", round((index + 1) * FRAME / RATE, 3)))
    return found


def onsets(probabilities: Iterable[float], threshold: float = 0.5, min_silence_ms: float = 250) -> list[float]:
    """Where speech starts (seconds), as vad_events decides it (see ``events_of``)."""
    return [at for kind, at in events_of(probabilities, threshold, min_silence_ms) if kind == "start"]
