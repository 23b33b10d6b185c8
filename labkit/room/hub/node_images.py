"""Images from one Docker engine into others, with no registry: ``docker save`` read once from the source and
streamed into ``docker load`` on every target at the same time, with progress on the terminal.

    copied = copy_image(manager, "labkit/lab:23.12-cpu", {"w1 (10.0.0.2)": w1, "w2 (10.0.0.3)": w2})

A target that already holds the image's id is left alone (given the tag when it lacks only that). The save is
read once whatever the number of targets: each target takes the same chunks from a short queue, so the
slowest one sets the pace and nothing of the image is written to disk here. A target that fails is dropped
from the stream, the others go on, and the failure is raised (EngineError naming it) once they are done.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

from ...docker.engine_errors import ENGINE_ERRORS, engine_error, explanation_of, status_of
from ...errors import EngineError, SetupError
from ...plumbing.downloads import say

CHUNK = 4 << 20
STEPS = 10  # a progress line at each tenth of the image
_QUEUED = 4  # chunks waiting for a slow target: memory held here is at most this many chunks per target


class _Target:
    """One engine taking the stream: its chunks arrive through ``chunks``; ``error`` once its load failed."""

    def __init__(self, name: str, client: Any) -> None:
        self.name, self.client = name, client
        self.queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUED)
        self.error: BaseException | None = None
        self.done = threading.Event()

    def chunks(self) -> Iterator[bytes]:
        while (chunk := self.queue.get()) is not None:
            yield chunk

    def load(self) -> None:
        try:
            for item in self.client.api.load_image(self.chunks()):
                if isinstance(item, dict) and item.get("error"):
                    raise EngineError(doing=f"load an image into {self.name}", detail=str(item["error"]))
        except BaseException as exc:  # kept for the caller, which raises it as labkit's
            self.error = exc
        finally:
            self.done.set()

    def put(self, chunk: bytes | None) -> None:
        """Hand ``chunk`` to the load, unless it failed (then nothing reads the queue any more)."""
        while not self.done.is_set():
            try:
                self.queue.put(chunk, timeout=0.5)
                return
            except queue.Full:
                continue


def holds(client: Any, image_id: str, tag: str) -> bool:
    """Whether the engine holds the image ``image_id``; tagged ``tag`` there when it held it under another name."""
    try:
        image = client.images.get(image_id)
    except ENGINE_ERRORS:
        return False
    if tag not in image.tags:
        repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        image.tag(repository, version)
    return True


def _stream(source: Any, tag: str, size: int, targets: list[_Target]) -> None:
    """The save of ``tag`` from ``source`` into every target's queue, saying how far it got at each tenth."""
    done, shown, t0 = 0, 0, time.monotonic()
    names = ", ".join(t.name for t in targets)
    say(f"copying {tag} ({size >> 20} MB) from this engine to {names} ...")
    for chunk in source.api.get_image(tag, chunk_size=CHUNK):
        for target in targets:
            target.put(chunk)
        done += len(chunk)
        step = min(STEPS - 1, STEPS * done // max(size, 1))  # the save runs a little over the image's size
        if step > shown:
            shown = step
            say(f"copying {tag}: {done >> 20} MB of about {size >> 20} MB ({100 * step // STEPS}%)")
        if all(t.done.is_set() for t in targets):
            break  # every load failed: the rest of the save would go nowhere
    for target in targets:
        target.put(None)
    for target in targets:
        target.done.wait()
    copied = [t.name for t in targets if t.error is None]
    if copied:
        say(f"copying {tag}: {done >> 20} MB (100%) into {', '.join(copied)} in {time.monotonic() - t0:.0f} s")


def copy_image(source: Any, tag: str, targets: dict[str, Any]) -> list[str]:
    """Copy ``tag`` from the ``source`` engine into each of ``targets`` ({name: docker client}) lacking its id,
    all at once (see the module's docstring); the names it was copied to. SetupError when the source lacks
    it; EngineError naming the targets whose load failed (the others have it)."""
    try:
        image = source.images.get(tag)
    except ENGINE_ERRORS as exc:
        if getattr(exc, "status_code", 0) == 404:
            raise SetupError(
                missing=tag,
                reason="not on this engine",
                needed_by="Copying images to the swarm's workers",
                remedy="build or load it on this engine (the manager's) first: the workers get it from here",
            ) from None
        raise engine_error(exc, f"read the image {tag}") from None
    try:
        wanted = [_Target(name, client) for name, client in targets.items() if not holds(client, image.id, tag)]
    except ENGINE_ERRORS as exc:
        raise engine_error(exc, f"tag {tag} on a node that holds it under another name") from None
    if not wanted:
        return []
    threads = [threading.Thread(target=t.load, name=f"load {t.name}", daemon=True) for t in wanted]
    for thread in threads:
        thread.start()
    try:
        _stream(source, tag, int(image.attrs.get("Size") or 0), wanted)
    except ENGINE_ERRORS as exc:
        for target in wanted:
            target.error = target.error or exc
            target.put(None)  # ends each load (the engine refuses the cut archive)
        raise engine_error(exc, f"save {tag}", "Check this engine with `docker info`, then run it again") from None
    finally:
        for thread in threads:
            thread.join(timeout=60)
    failed = {t.name: t.error for t in wanted if t.error is not None}
    if failed:
        raise EngineError(
            doing=f"load {tag} into {', '.join(failed)}",
            status_code=status_of(next(iter(failed.values()))),
            detail="\n".join(
                f"{name}: {getattr(error, 'detail', '') or explanation_of(error)}" for name, error in failed.items()
            ),
            remedy="Check that engine (`docker info` there; its disk space), then run it again: "
            "the nodes that have it are left alone",
        )
    return [t.name for t in wanted]
