"""Requests that Triton released without an answer, told from its log.

When a backend releases a request with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE and the model's config has no
``sequence_batching { iterative_sequence: true }``, Triton 23.12 refuses the release, logs why, and releases
the request with no response (core r23.12 src/infer_request.cc:117-123; python_backend r23.12
src/python_be.cc:2487-2505). Its client would wait to its time limit for an answer that never comes; the
log line is the only trace, so labkit reads it while it waits.
"""

from __future__ import annotations

from typing import Any

from ..errors import LabkitError, RequestDroppedError

#: Triton's words for a refused rescheduling (the line names no request and no model).
RESCHEDULE_REFUSED = "while the model is not configured to handle such a flag"
ITERATIVE = "sequence_batching { iterative_sequence: true }"


def dropped_error(server: Any, model: str, mark: int) -> RequestDroppedError | None:
    """The error for a request to ``model`` that Triton dropped since log offset ``mark``, or None."""
    line = next((line for line in server.logs.since(mark).splitlines() if RESCHEDULE_REFUSED in line), None)
    if line is None:
        return None
    try:  # the line names no model: only one whose config lacks iterative sequences can have caused it
        if server.repository.read_config(model).sequence_batching.iterative_sequence:
            return None
    except LabkitError:
        return None  # a model labkit has no config for: nothing to tell about it
    said = line.split("] ", 1)[-1].strip()
    return RequestDroppedError(model=model, reason=said, needs=ITERATIVE)
