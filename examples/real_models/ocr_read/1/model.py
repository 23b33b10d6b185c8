"""Crops each detected box and has ocr_rec read it, every crop in a request of its own (BLS).

The number of boxes differs from image to image, which an ensemble's fixed wiring cannot express; the
crops are sent all at once with async_exec, so Triton's dynamic batcher puts them in ocr_rec's batches."""

import asyncio
import math

import cv2
import numpy as np
import triton_python_backend_utils as pb_utils

HEIGHT, WIDTH = 48, 320  # ocr_rec's CROP: [3, 48, 320]


def crop(image, box):
    """The box's quadrilateral, straightened (PP-OCR's get_rotate_crop_image)."""
    width = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    height = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    corners = np.float32([[0, 0], [width, 0], [width, height], [0, height]])
    matrix = cv2.getPerspectiveTransform(box.astype(np.float32), corners)
    return cv2.warpPerspective(
        image, matrix, (width, height), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC
    )


def normalized(piece):
    """A crop as the recognizer takes it: 48 high, at most 320 wide, scaled to [-1, 1], padded with 0."""
    height, width = piece.shape[:2]
    resized_width = min(WIDTH, int(math.ceil(HEIGHT * width / height)))
    resized = cv2.resize(piece, (resized_width, HEIGHT)).astype(np.float32).transpose(2, 0, 1) / 255
    out = np.zeros((3, HEIGHT, WIDTH), np.float32)
    out[:, :, :resized_width] = (resized - 0.5) / 0.5
    return out


def lines(boxes):
    """Boxes grouped into lines of text (a box whose middle lies within the line's height joins it),
    top to bottom, each line's boxes left to right."""
    groups = []
    for box in sorted(boxes, key=lambda b: b[:, 1].mean()):
        middle = box[:, 1].mean()
        if groups and groups[-1][0] <= middle <= groups[-1][1]:
            groups[-1][2].append(box)
        else:
            groups.append([box[:, 1].min(), box[:, 1].max(), [box]])
    return [sorted(found, key=lambda b: b[:, 0].min()) for _, _, found in groups]


class TritonPythonModel:
    async def execute(self, requests):
        return [await self.read(request) for request in requests]

    async def read(self, request):
        image = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
        boxes = pb_utils.get_input_tensor_by_name(request, "BOXES").as_numpy()
        bgr = np.ascontiguousarray(image[:, :, ::-1])  # PP-OCR's networks were trained on BGR
        grouped = lines(list(boxes))
        crops = [normalized(crop(bgr, box))[None] for line in grouped for box in line]
        # every crop is cut first, then all are sent together: they reach the batcher within its queue delay
        pending = [
            pb_utils.InferenceRequest(
                model_name="ocr_rec", inputs=[pb_utils.Tensor("CROP", piece)], requested_output_names=["TEXT"]
            ).async_exec()
            for piece in crops
        ]
        answers = await asyncio.gather(*pending)
        words = []
        for answer in answers:
            if answer.has_error():
                return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"ocr_rec: {answer.error().message()}"))
            words.append(pb_utils.get_output_tensor_by_name(answer, "TEXT").as_numpy()[0, 0].decode())
        text, start = [], 0
        for line in grouped:
            text.append(" ".join(words[start : start + len(line)]).encode())
            start += len(line)
        return pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", np.array(text, dtype=np.object_))])
