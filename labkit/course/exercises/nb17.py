"""The exercise of notebook 17 (real models, OCR): ocr_read sending an image's crops to ocr_rec in batches,
not one by one.

17-one-request: the check reads pages of its own (3 and 11 lines) through ``ocr`` and compares ocr_rec's
statistics before and after: how many crops it read (``inference_count``) in how many requests
(``inference_stats.success.count``), which must be the fewest that its max_batch_size allows, and the text.
"""

from __future__ import annotations

import math

from ...server.base import TritonServer
from ..lessons import real_models
from .core import NotYet, exercise

READER, RECOGNIZER = "ocr_read", "ocr_rec"
PAGES = (real_models.LINES[12:15], real_models.LINES[:11])  # fewer crops than a batch, and more


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
