"""The exercises of notebook 17 (real models): vad_events with a threshold of the client's own, sent as a
parameter of each request; and ocr_read sending an image's crops to ocr_rec in batches, not one by one.

17-threshold: the check asks vad itself for the probabilities of a stream of its own, works out the events a threshold
gives (labkit.course.lessons.real_models.events_of, the rule vad_events follows), and compares them with what
the person's vad_events streams back: with no parameter (the config's threshold), and with two thresholds
of its own that move the events.

17-one-request: the check reads pages of its own (3 and 11 lines) through ``ocr`` and compares ocr_rec's
statistics before and after: how many crops it read (``inference_count``) in how many requests
(``inference_stats.success.count``), which must be the fewest that its max_batch_size allows, and the text.
"""

from __future__ import annotations

import math

from ...server.base import TritonServer
from ..lessons import real_models
from .core import NotYet, exercise

MODEL = "vad_events"
README = "https://github.com/triton-inference-server/python_backend/blob/r23.12/README.md"
THRESHOLDS = ("0.95", "0.3")  # each moves an event of the check's audio away from the config's 0.5
SEQUENCE = 9100  # the check's own streams: 9100, 9101, ...
READER, RECOGNIZER = "ocr_read", "ocr_rec"
PAGES = (real_models.LINES[12:15], real_models.LINES[:11])  # fewer crops than a batch, and more


@exercise("17-threshold", sources=(MODEL,))
def threshold(server: TritonServer) -> None:
    frames = real_models.frames(real_models.mixed_audio()[0])
    probabilities = real_models.speech_probabilities(server, frames, sequence_id=SEQUENCE)
    config = float(server.model_config(MODEL)["parameters"]["threshold"]["string_value"])
    asked: list[tuple[dict[str, str] | None, float, str]] = [(None, config, "default")]
    asked += [({"threshold": value}, float(value), "threshold") for value in THRESHOLDS]
    for offset, (parameters, value, rule) in enumerate(asked, start=1):
        expected = real_models.events_of(probabilities, threshold=value)
        got = real_models.events(server, frames, sequence_id=SEQUENCE + offset, parameters=parameters)
        if got != expected:
            sent = f"with threshold={value!r} in every request" if parameters else "with no parameter"
            raise NotYet(
                f"{sent}, vad_events streamed {_shown(got)}; vad's probabilities give {_shown(expected)} at "
                f"threshold {value}.",
                "use the request's threshold for that frame's decision, start and end alike; without one, the config's."
                if parameters
                else "a request without parameters keeps the config's threshold.",
                rule=rule,
            )


def _shown(events: list[tuple]) -> str:
    return ", ".join(f"{kind} {at:.3f} s" for kind, at in events) or "no events"


@exercise("17-one-request", sources=(READER,))
def one_request(server: TritonServer) -> None:
    batch = int(server.model_config(RECOGNIZER)["max_batch_size"])
    for lines in PAGES:
        before = _counts(server)
        found = real_models.read(server, real_models.render(lines))
        crops, requests = (after - earlier for after, earlier in zip(_counts(server), before))
        fewest = math.ceil(crops / batch)
        if requests != fewest:
            raise NotYet(
                f"for a page of {len(lines)} lines, ocr_read sent {crops} crops to {RECOGNIZER} in {requests} "
                f"requests; {fewest} can carry them ({RECOGNIZER}'s max_batch_size is {batch}).",
                f"stack the crops, at most {batch} to a request.",
                rule="requests",
            )
        if len(found) != len(lines) or real_models.character_accuracy(lines, found) < 0.95:
            raise NotYet(
                f"for a page of {list(lines)}, ocr read {found}.",
                "read the answer's TEXT row by row, in the order the crops went in, and join each line's words.",
                rule="text",
            )


def _counts(server: TritonServer) -> tuple[int, int]:
    """ocr_rec's crops read and requests answered so far."""
    stats = server.stats(RECOGNIZER)["model_stats"][0]
    return int(stats.get("inference_count", 0)), int(stats["inference_stats"]["success"].get("count", 0))
