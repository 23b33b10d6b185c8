"""PP-OCRv4 text recognition, run with onnxruntime from the weights in the rapidocr-onnxruntime wheel.

Triton's dynamic batcher hands execute() several requests; their crops go through the network as one
batch, and the library's own CTC decoder turns each row back into text."""

import json
from pathlib import Path

import numpy as np
import onnxruntime
import rapidocr_onnxruntime
import triton_python_backend_utils as pb_utils
from rapidocr_onnxruntime.ch_ppocr_rec.utils import CTCLabelDecode


def session(threads):
    """The recognizer's onnxruntime session (labkit bench measures onnxruntime alone with these options)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    weights = Path(rapidocr_onnxruntime.__file__).parent / "models" / "ch_PP-OCRv4_rec_infer.onnx"
    return onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.session = session(int(config["parameters"]["intra_op_num_threads"]["string_value"]))
        characters = self.session.get_modelmeta().custom_metadata_map["character"].splitlines()
        self.decode = CTCLabelDecode(character=characters)

    def execute(self, requests):
        crops = [pb_utils.get_input_tensor_by_name(r, "CROP").as_numpy() for r in requests]
        sizes = [len(c) for c in crops]
        batch = np.concatenate(crops)
        found = self.decode(self.session.run(None, {"x": batch})[0])
        responses, row = [], 0
        for size in sizes:
            texts = np.array([[t.encode()] for t, _ in found[row : row + size]], dtype=np.object_)
            scores = np.array([[s] for _, s in found[row : row + size]], dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", texts), pb_utils.Tensor("SCORE", scores)]))
            row += size
        return responses
