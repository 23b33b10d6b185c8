"""Speech start and end events, sent as they happen (a decoupled model), from silero-vad run here.

Speech starts at the first frame whose probability reaches the threshold, and ends at the first of
min_silence_ms of frames below threshold - 0.15 (silero-vad's own hysteresis). Each stream's state
(the network's state and context, as in vad; in speech or not, frames seen, quiet frames so far) is
kept per correlation id, freed at END or after the sequence's idle time."""

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import onnxruntime
import triton_python_backend_utils as pb_utils

FRAME, CONTEXT, RATE = 512, 64, 16000
FRAME_S = FRAME / RATE  # one frame: 32 ms


class Stream:
    def __init__(self):
        self.state = np.zeros((2, 1, 128), np.float32)
        self.context = np.zeros(CONTEXT, np.float32)
        self.frames = 0
        self.speech = False
        self.quiet = 0
        self.seen = time.monotonic()


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = {key: value["string_value"] for key, value in config["parameters"].items()}
        self.threshold = float(parameters["threshold"])
        self.quiet_frames = max(1, round(float(parameters["min_silence_ms"]) / 1000 / FRAME_S))
        self.idle_s = int(config["sequence_batching"]["max_sequence_idle_microseconds"]) / 1e6
        self.streams = {}
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
        # silero_vad's __init__ imports torch; the ONNX file next to it needs only onnxruntime.
        package = Path(importlib.util.find_spec("silero_vad").submodule_search_locations[0])
        self.session = onnxruntime.InferenceSession(
            str(package / "data" / "silero_vad.onnx"), options, providers=["CPUExecutionProvider"]
        )

    def execute(self, requests):
        now = time.monotonic()
        for corrid in [c for c, s in self.streams.items() if now - s.seen > self.idle_s]:
            del self.streams[corrid]
        for request in requests:
            sender = request.get_response_sender()
            try:
                for event in self.events(request):
                    sender.send(event)
            except pb_utils.TritonModelException as exc:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def events(self, request):
        def control(name):
            return pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0]

        corrid, start, end = int(control("CORRID")), control("START") > 0, control("END") > 0
        if start:
            self.streams[corrid] = Stream()
        stream = self.streams.get(corrid)
        if stream is None:
            raise pb_utils.TritonModelException(f"AUDIO for sequence {corrid} has no state: start it with START")
        frame = pb_utils.get_input_tensor_by_name(request, "AUDIO").as_numpy().reshape(-1)
        if frame.size != FRAME:
            raise pb_utils.TritonModelException(f"AUDIO holds {frame.size} samples: send {FRAME} (32 ms at 16 kHz)")
        speech, stream.state = self.session.run(
            None,
            {"input": np.concatenate([stream.context, frame])[None], "state": stream.state, "sr": np.array(RATE, np.int64)},
        )
        stream.context = frame[-CONTEXT:].copy()
        probability = float(speech.reshape(-1)[0])
        stream.seen = time.monotonic()
        found = []
        if not stream.speech and probability >= self.threshold:
            stream.speech, stream.quiet = True, 0
            found.append(self.event("start", stream.frames))
        elif stream.speech:
            stream.quiet = stream.quiet + 1 if probability < self.threshold - 0.15 else 0
            if stream.quiet >= self.quiet_frames:
                stream.speech = False
                found.append(self.event("end", stream.frames - stream.quiet + 1))
        stream.frames += 1
        if end:
            if stream.speech:
                found.append(self.event("end", stream.frames))
            del self.streams[corrid]
        return found

    @staticmethod
    def event(kind, frame):
        return pb_utils.InferenceResponse(
            [
                pb_utils.Tensor("EVENT", np.array([[kind.encode()]], dtype=np.object_)),
                pb_utils.Tensor("TIME", np.array([[frame * FRAME_S]], dtype=np.float32)),
            ]
        )
