"""Talking to a running Triton: requests (HTTP, gRPC, streams), what they may carry, and how a
caller waits for an answer."""
