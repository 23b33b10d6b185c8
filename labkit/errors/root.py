"""The root of the hierarchy, and what the machine lacks (set-up, a GPU, the Docker engine)."""

from __future__ import annotations


class LabkitError(Exception):
    """Base class of every error labkit raises."""


class SetupError(LabkitError):
    """The machine or environment lacks something Triton needs (files, a Python, a library).
    ``missing``: what is missing (an image name, a file, "Docker engine"), when known; ``reason``: why,
    in a few fixed words ("pull failed", "invalid image name", "not pulled", "unreachable", ...)."""

    def __init__(self, message: str, *, missing: str = "", reason: str = "") -> None:
        self.missing = missing
        self.reason = reason
        super().__init__(message)


class GpuUnavailableError(SetupError):
    """``wanted`` (a KIND_GPU model, CUDA shared memory, a CUDA build's kernel) needs a GPU or CUDA
    that this machine lacks; ``reason`` says what was seen ("no /dev/nvidia0 and no nvidia-smi", ...)."""

    def __init__(self, message: str, *, missing: str = "GPU", reason: str = "", wanted: str = "") -> None:
        self.wanted = wanted
        super().__init__(message, missing=missing, reason=reason)


class EngineError(LabkitError):
    """The Docker engine refused or failed an operation; ``status_code`` is its HTTP status (0 if none)."""

    def __init__(self, message: str, *, status_code: int = 0) -> None:
        self.status_code = status_code
        super().__init__(message)
