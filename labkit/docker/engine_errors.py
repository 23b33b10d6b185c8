"""docker-py's errors as labkit's, in one place: what the engine refused, its own explanation, its HTTP status
kept as ``status_code`` (0 when the error had none: a build step's output, a broken connection), and what to
do next. Every labkit call that talks to the engine raises through here, so no docker-py or requests error
escapes it."""

from __future__ import annotations

import docker.errors
import requests.exceptions

from ..errors import EngineError

#: What a call to the engine may raise: docker-py's own errors, and the HTTP layer's beneath them.
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


def status_of(exc: BaseException) -> int:
    """The engine's HTTP status of ``exc``, 0 when it carries none."""
    return int(getattr(exc, "status_code", None) or 0)


def explanation_of(exc: BaseException) -> str:
    """The engine's own words for ``exc`` (docker-py's ``explanation``), else the error's text."""
    return str(getattr(exc, "explanation", None) or exc)


def engine_error(exc: BaseException, doing: str, remedy: str = "") -> EngineError:
    """EngineError for ``exc``: the engine could not do ``doing`` ("remove container c"), its HTTP status
    and explanation, and ``remedy``, what to do next."""
    return EngineError(doing=doing, status_code=status_of(exc), detail=explanation_of(exc), remedy=remedy)
