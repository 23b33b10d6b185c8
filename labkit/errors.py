"""The one exception hierarchy of labkit. Every message says what to do next."""

from __future__ import annotations


class LabkitError(Exception):
    """Base class of every error labkit raises."""


class SetupError(LabkitError):
    """The machine or environment lacks something Triton needs (files, a Python, a library)."""


class ServerError(LabkitError):
    """The Triton server could not start, or stopped working."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        if log_tail:
            message = f"{message}\n--- last server log lines ---\n{log_tail}"
        super().__init__(message)


class ServerStartError(ServerError):
    """Triton exited or did not become ready during start-up."""


class ServerNotRunningError(ServerError):
    """An operation needs a running server, and there is none (stopped, or died)."""


class RepositoryError(LabkitError):
    """A model repository operation was refused or failed."""


class InvalidNameError(RepositoryError, ValueError):
    """A model, backend or file name could escape the repository or is not allowed."""


class ConfigError(RepositoryError):
    """A config.pbtxt is malformed (unknown field, wrong type) or incomplete."""


class ModelLoadError(LabkitError):
    """Triton refused to load a model; the message carries Triton's reason."""


class InferenceError(LabkitError):
    """An inference request failed."""


class ModelNotFoundError(InferenceError):
    """The request named a model that is not loaded."""


class RequestError(InferenceError):
    """Triton rejected the request's inputs (name, datatype or shape)."""


class AnswerMismatchError(InferenceError):
    """A model answered, but not with the expected values."""


class BuildError(LabkitError):
    """A C++ backend did not compile, or the library lacks what Triton requires; nothing was loaded."""
