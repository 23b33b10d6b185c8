"""Telling a broken connection to Triton from Triton refusing a call, for both client protocols."""

from __future__ import annotations

import http.client

from tritonclient.utils import InferenceServerException

#: What tritonclient's HTTP client raises when the server is gone: a refused connection (OSError)
#: or one closed mid-response (http.client.HTTPException, from geventhttpclient).
CONNECTION_ERRORS = (OSError, http.client.HTTPException)
#: tritonclient's status for a gRPC call whose connection broke (the HTTP client raises OSError instead).
_GRPC_UNAVAILABLE = "StatusCode.UNAVAILABLE"


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection itself failed (as opposed to Triton refusing the call)."""
    if isinstance(exc, CONNECTION_ERRORS):
        return True
    return isinstance(exc, InferenceServerException) and exc.status() == _GRPC_UNAVAILABLE
