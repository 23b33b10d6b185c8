"""silero-vad on a stream of 512-sample frames, its state kept per sequence by the model itself.

python_backend r23.12 has no implicit state: the model keeps a store keyed by correlation id. It frees
an entry at END, and frees one whose sequence Triton dropped as idle (max_sequence_idle_microseconds:
Triton forgets the sequence without telling the model, so the model evicts what it has not seen for
that long). The requests of one execute belong to different streams, and run through the network as
one batch along its state's batch axis."""

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import onnxruntime
import triton_python_backend_utils as pb_utils

FRAME, CONTEXT, RATE = 512, 64, 16000  # silero's frame at 16 kHz, and the samples it needs before it


def weights():
    # silero_vad's __init__ imports torch; the ONNX file next to it needs only onnxruntime.
    return Path(importlib.util.find_spec("silero_vad").submodule_search_locations[0]) / "data" / "silero_vad.onnx"


class Stream:
    def __init__(self):
        self.state = np.zeros((2, 128), np.float32)
        self.context = np.zeros(CONTEXT, np.float32)
        self.seen = time.monotonic()


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = int(config["parameters"]["intra_op_num_threads"]["string_value"])
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(weights()), options, providers=["CPUExecutionProvider"])
        self.idle_s = int(config["sequence_batching"]["max_sequence_idle_microseconds"]) / 1e6
        self.streams = {}  # correlation id -> Stream
        self.logger = pb_utils.Logger

    def execute(self, requests):
        self.evict_idle()
        responses = [None] * len(requests)
        ready = []  # (index, correlation id, frame)
        for index, request in enumerate(requests):
            corrid = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0])
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)[0] > 0
            frame = pb_utils.get_input_tensor_by_name(request, "AUDIO").as_numpy().reshape(-1)
            if start:
                self.streams[corrid] = Stream()
            if corrid not in self.streams:
                responses[index] = self.error(
                    f"AUDIO for sequence {corrid} has no state: start the sequence with START "
                    f"(a sequence idle for {self.idle_s:g} s is dropped)"
                )
            elif frame.size != FRAME:
                responses[index] = self.error(f"AUDIO holds {frame.size} samples: send {FRAME} (32 ms at 16 kHz)")
            else:
                ready.append((index, corrid, frame))
        for chunk in self.one_per_stream(ready):
            self.run(chunk, responses)
        for index, request in enumerate(requests):
            if pb_utils.get_input_tensor_by_name(request, "END").as_numpy().reshape(-1)[0] > 0:
                corrid = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0])
                if self.streams.pop(corrid, None) is not None:
                    self.logger.log_info(f"vad: freed sequence {corrid} at END ({len(self.streams)} kept)")
        return responses

    @staticmethod
    def error(message):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(message))

    @staticmethod
    def one_per_stream(ready):
        """Batches in which each stream appears once, its frames in order (the state carries over)."""
        while ready:
            seen, chunk, later = set(), [], []
            for item in ready:
                (later if item[1] in seen else chunk).append(item)
                seen.add(item[1])
            yield chunk
            ready = later

    def run(self, chunk, responses):
        streams = [self.streams[corrid] for _, corrid, _ in chunk]
        frames = np.stack([np.concatenate([s.context, frame]) for s, (_, _, frame) in zip(streams, chunk)])
        state = np.stack([s.state for s in streams], axis=1)  # [2, batch, 128]
        speech, state = self.session.run(None, {"input": frames, "state": state, "sr": np.array(RATE, np.int64)})
        now = time.monotonic()
        for row, (stream, (index, _, frame)) in enumerate(zip(streams, chunk)):
            stream.state, stream.context, stream.seen = state[:, row], frame[-CONTEXT:].copy(), now
            output = pb_utils.Tensor("SPEECH", speech[row : row + 1].astype(np.float32))
            responses[index] = pb_utils.InferenceResponse([output])

    def evict_idle(self):
        now = time.monotonic()
        for corrid in [c for c, s in self.streams.items() if now - s.seen > self.idle_s]:
            del self.streams[corrid]
            self.logger.log_info(f"vad: freed sequence {corrid}, idle over {self.idle_s:g} s ({len(self.streams)} kept)")
