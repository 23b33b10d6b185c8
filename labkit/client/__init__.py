"""Talking to a running Triton: requests (HTTP, gRPC, streams), what they may carry, and how a
caller waits for an answer. Above ``server``: a request reads the server's log and its stubs' records
to say why it failed. ``__all__`` names the modules other wings use."""

__all__ = [
    "dropped",
    "generate",
    "infer_parameters",
    "inference",
    "request_fit",
    "sequence_ids",
    "transports",
    "waiting",
]
