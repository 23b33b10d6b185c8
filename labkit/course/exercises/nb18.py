"""The exercise of notebook 18 (real models, a voice streamed): vad_events with a threshold of the client's
own, sent as a parameter of each request.

18-threshold: the check asks vad itself for the probabilities of a stream of its own, works out the events a
threshold gives (labkit.course.lessons.real_models.events_of, the rule vad_events follows), and compares them
with what the person's vad_events streams back: with no parameter (the config's threshold), and with two
thresholds of its own that move the events.
"""

from __future__ import annotations

from ...server.base import TritonServer
from ..lessons import real_models
from .core import NotYet, exercise

MODEL = "vad_events"
THRESHOLDS = ("0.95", "0.3")  # each moves an event of the check's audio away from the config's 0.5
SEQUENCE = 9100  # the check's own streams: 9100, 9101, ...


@exercise("18-threshold", sources=(MODEL,))
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
