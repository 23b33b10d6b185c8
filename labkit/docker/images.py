"""Getting a Triton image onto the engine: the local copy, or a pull with a progress line."""

from __future__ import annotations

import sys
import time
from typing import Any

import docker.client
import docker.errors
import docker.utils

import docker

from ..errors import SetupError
from .cpu_image import IMAGE as OFFLINE_IMAGE
from .engine_errors import engine_error, explanation_of

DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:23.12-py3"
_BAD_REQUEST = 400  # the engine's answer to a malformed image reference


def missing_hint(image: str) -> str:
    if image == OFFLINE_IMAGE:
        return "Build it here, no registry needed (about 80 s, as root): `labkit image build`."
    return (
        f"For a CPU-only image built here without any registry, run `labkit image build` "
        f"and use image={OFFLINE_IMAGE!r}."
    )


class _PullProgress:
    """One self-rewriting line on stderr: layers done and megabytes downloaded."""

    def __init__(self, image: str, enabled: bool) -> None:
        self.image, self.enabled = image, enabled
        self.layers: dict[str, tuple[int, int]] = {}
        self.done: set[str] = set()
        self.last = 0.0

    def update(self, event: dict) -> None:
        layer, status = event.get("id"), event.get("status", "")
        detail = event.get("progressDetail") or {}
        if layer and detail.get("total"):
            self.layers[layer] = (detail.get("current", 0), detail["total"])
        if layer and status in ("Pull complete", "Already exists"):
            self.done.add(layer)
        now = time.monotonic()
        if self.enabled and now - self.last > 0.5:
            self.last = now
            current = sum(c for c, _ in self.layers.values()) / 1e6
            total = sum(t for _, t in self.layers.values()) / 1e6
            print(
                f"\rpulling {self.image}: {len(self.done)} layers done, {current:.0f}/{total:.0f} MB   ",
                end="",
                file=sys.stderr,
                flush=True,
            )

    def finish(self, ok: bool) -> None:
        if self.enabled:
            print(f"\rpulling {self.image}: {'done' if ok else 'failed'}{' ' * 40}", file=sys.stderr, flush=True)


def pull_image(image: str, client: docker.client.DockerClient, progress: bool = True) -> None:
    """Pull ``image`` with a progress line; a failure raises SetupError saying why and what else to do."""
    repository, tag = docker.utils.parse_repository_tag(image)
    bar = _PullProgress(image, progress)
    try:
        for event in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                raise docker.errors.APIError(event["error"])
            bar.update(event)
    except docker.errors.APIError as exc:
        bar.finish(False)
        reason = explanation_of(exc)
        login = (
            "If the registry needs a login, run `docker login nvcr.io` (user $oauthtoken, an NGC API key). "
            if image.startswith("nvcr.io/")
            else ""
        )
        raise SetupError(
            missing=image,
            reason="pull failed",
            detail=f"not on this engine, and the registry said: {reason}",
            remedy=login + missing_hint(image),
        ) from None
    bar.finish(True)


def local_image(image: str, client: docker.client.DockerClient, *, pull: bool = True, progress: bool = True) -> Any:
    """The engine's copy of ``image``, pulled first if it is missing (when ``pull``)."""
    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code == _BAD_REQUEST:
            raise SetupError(
                missing=image,
                reason="invalid image name",
                detail=str(exc.explanation),
                remedy=f"Write it as [registry/]name[:tag], e.g. {OFFLINE_IMAGE!r}",
            ) from None
        raise engine_error(exc, f"look up {image!r}", "Check the engine with `docker info`, then try again") from None
    if image == OFFLINE_IMAGE:  # built locally, published nowhere: pulling would only fail
        raise SetupError(missing=image, reason="not built", detail="not on this engine yet", remedy=missing_hint(image))
    if not pull:
        raise SetupError(
            missing=image, reason="not pulled", detail="not on this engine, and pull=False", remedy=missing_hint(image)
        )
    pull_image(image, client, progress)
    return client.images.get(image)
