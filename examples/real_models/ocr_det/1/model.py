"""PP-OCRv4 text detection, run with onnxruntime from the weights in the rapidocr-onnxruntime wheel.

Pre- and post-processing are the library's own (DetPreProcess, DBPostProcess through its TextDetector),
so the served model finds the boxes that RapidOCR itself finds."""

import json
from pathlib import Path

import numpy as np
import rapidocr_onnxruntime
import triton_python_backend_utils as pb_utils
from rapidocr_onnxruntime.ch_ppocr_det.text_detect import TextDetector

MIN_SIDE = 8  # pixels: the network downsamples by 32 after resizing; anything smaller holds no text


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        threads = int(config["parameters"]["intra_op_num_threads"]["string_value"])
        weights = Path(rapidocr_onnxruntime.__file__).parent / "models" / "ch_PP-OCRv4_det_infer.onnx"
        self.detector = TextDetector(
            {
                "model_path": str(weights),
                "intra_op_num_threads": threads,
                "inter_op_num_threads": 1,
                "use_cuda": False,
                "use_dml": False,
                # RapidOCR's defaults (its config.yaml)
                "limit_side_len": 736,
                "limit_type": "min",
                "mean": [0.5, 0.5, 0.5],
                "std": [0.5, 0.5, 0.5],
                "thresh": 0.3,
                "box_thresh": 0.5,
                "max_candidates": 1000,
                "unclip_ratio": 1.6,
                "use_dilation": True,
                "score_mode": "fast",
            }
        )

    def execute(self, requests):
        responses = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
            height, width = image.shape[:2]
            if height < MIN_SIDE or width < MIN_SIDE:
                error = pb_utils.TritonError(
                    f"IMAGE is {height}x{width} pixels: send an RGB image (height, width, 3) "
                    f"of at least {MIN_SIDE}x{MIN_SIDE}"
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            boxes, _ = self.detector(np.ascontiguousarray(image[:, :, ::-1]))  # the library reads BGR
            boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4, 2)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("BOXES", boxes)]))
        return responses
