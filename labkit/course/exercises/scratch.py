"""Models a check creates for itself beside the person's, and removes again.

A check judges the person's latest code under conditions it chooses (other parameters, a wrapper that
reports what the code did, a library path Triton has never opened) without changing what the notebook
serves: the model is unloaded and its folder removed however the check ends.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ...errors import LabkitError
from ...native.build import Build, latest_build
from ...repository import ModelConfig
from ...server.base import TritonServer
from .core import NotYet

#: Every scratch model's name starts with this, so a person never mistakes one for theirs.
PREFIX = "labkit_check_"


@contextmanager
def scratch_model(
    server: TritonServer, name: str, config: ModelConfig, files: Mapping[str, str | bytes | Path] | None = None
) -> Iterator[str]:
    """A model ``labkit_check_<name>`` with ``config`` (renamed) and ``files`` (paths relative to the
    model folder: text, bytes, or a file to copy); not loaded. Yields its name; on exit it is unloaded
    (if it was) and its folder removed."""
    model = PREFIX + name
    folder = server.repository.model_dir(model)
    shutil.rmtree(folder, ignore_errors=True)  # what an interrupted check left behind
    copy = type(config)()
    copy.CopyFrom(config)
    copy.name = model
    try:
        server.repository.write_config(copy)
        for relpath, data in (files or {}).items():
            if isinstance(data, Path):
                target = folder / relpath
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(data, target)
            else:
                server.repository.write_file(model, relpath, data, version=None)
        yield model
    finally:
        remove(server, model)


@contextmanager
def owned_model(server: TritonServer, name: str) -> Iterator[str]:
    """A model named ``name`` that the block itself writes and loads; removed afterwards like a scratch
    model, so a check leaves nothing behind in the notebook."""
    try:
        yield name
    finally:
        remove(server, name)


def remove(server: TritonServer, model: str) -> None:
    """Unload ``model`` if the server has it and remove its folder."""
    if server.alive and any(m["name"] == model for m in server.models.index()):
        try:
            server.unload(model)
        except LabkitError:  # it never loaded, or will not finish unloading: the folder goes anyway
            pass
    shutil.rmtree(server.repository.model_dir(model), ignore_errors=True)


def library_files(build: Build) -> dict[str, Path]:
    """The files that put ``build``'s library in version 1 of a scratch model. Name the model after
    ``build.digest``: Triton never reopens a library path, so a path must never hold other code."""
    return {f"1/{build.library.name}": build.library}


def latest(server: TritonServer, backend: str) -> Build:
    """The person's latest build of ``backend`` (NotYet if there is none).

    A cell that failed to compile leaves no build: this is then the one before it. (The record of each
    cell's latest attempt in labkit.course.exercises.core can say "your latest cell did not build" first.)"""
    build = latest_build(backend, server.runtime.toolchain())
    if build is None or not build.source.exists():
        raise NotYet(
            f"backend {backend!r} was never built here.",
            f"run the `%%triton_cpp {backend}` cell first.",
            rule="not-built",
        )
    return build


def config_of(server: TritonServer, model: str, writer: str) -> ModelConfig:
    """The config the notebook wrote for ``model`` (NotYet naming ``writer``, the cell that writes it, if none)."""
    if not (server.repository.model_dir(model) / "config.pbtxt").exists():
        raise NotYet(f"model {model!r} has no config yet.", f"run {writer} first.", rule="setup")
    return server.repository.read_config(model)
