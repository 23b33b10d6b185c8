"""labkit's launcher around Triton's Python stub (``labkit/stub_side``), and what it recorded.

Every launcher calls ``install`` on the backend folder's ``python/`` before Triton starts; Triton's
own stub and ``triton_python_backend_utils.py`` go to ``python/stub/`` (``TRITON_OWN``). Then a
stub that ends itself (``os._exit``, ``sys.exit`` outside a request, a segfault in an extension)
leaves ``labkit-stubs/<instance>.json`` behind: its exit code or signal, its last lines, and the
model.py frames that called ``os._exit``; ``exits`` reads them and ``describe`` says it in words.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

from ..repository.files import source_line, write_atomic
from ..stub_side import DEBUG_DIR, FOLDER, PLACED, RECORDS_DIR, STUB, TRITON_DIR


def install(python_dir: Path) -> None:
    """Put labkit's stand-ins where Triton looks for the stub and its utilities module."""
    for src, name in PLACED.items():
        _write_if_changed(python_dir / name, (FOLDER / src).read_bytes(), 0o755 if name == STUB else 0o644)
    for folder in (TRITON_DIR, RECORDS_DIR, DEBUG_DIR):
        (python_dir / folder).mkdir(parents=True, exist_ok=True)


def copy_triton_own(python_dir: Path, files: list[Path]) -> None:
    """Copy Triton's stub and utilities module under ``stub/`` (copies, not links: the folder may be
    mounted into a container later)."""
    for src in files:
        target = python_dir / TRITON_DIR / src.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():  # a link into a container image, from a Docker run in this workdir
            target.unlink()
        if not target.exists() or target.read_bytes() != src.read_bytes():
            shutil.copy2(src, target)


def _write_if_changed(path: Path, data: bytes, mode: int) -> None:
    if not path.exists() or path.read_bytes() != data:
        write_atomic(path, data, mode)


@dataclass(frozen=True)
class StubExit:
    """How one Python stub process ended, as labkit's launcher saw it."""

    instance: str
    pid: int
    ended: float
    exit_code: int | None
    signal: int | None
    last_lines: list[str] = field(default_factory=list)
    how: str = ""  # e.g. "os._exit(3)", when model.py called it
    frames: list[dict] = field(default_factory=list)  # model.py frames of that call, innermost first

    @property
    def ending(self) -> str:
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"was killed by {name} (signal {self.signal})"
        return f"exited with exit code {self.exit_code}"


def exits(python_dir: Path, model: str, since: float) -> list[StubExit]:
    """The stubs of ``model``'s instances that ended abnormally at or after ``since`` (time.time())."""
    instance = re.compile(rf"{re.escape(model)}_\d+_\d+")
    found = []
    for path in sorted((python_dir / RECORDS_DIR).glob("*.json")):
        if not instance.fullmatch(path.stem):
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced right now
        if record.get("ended", 0) < since:
            continue
        where = record.get("where") or {}
        found.append(
            StubExit(
                record["instance"],
                record["pid"],
                record["ended"],
                record.get("exit_code"),
                record.get("signal"),
                list(record.get("last_lines") or []),
                where.get("how", ""),
                list(where.get("frames") or []),
            )
        )
    return found


def _frame_text(frame: dict) -> str:
    line = source_line(frame["file"], frame["line"])
    return f"model.py:{frame['line']} in {frame['function']}" + (f"\n    {line}" if line else "")


def describe(ended: list[StubExit], lines: int = 8) -> str:
    """Each ended stub in words: how it ended, where model.py ended it, its last lines."""
    parts = []
    for stub in ended:
        text = f"The Python stub of instance {stub.instance} (pid {stub.pid}) {stub.ending}."
        if stub.how and stub.frames:
            text += f"\n  {stub.how} was called at {_frame_text(stub.frames[0])}"
        tail = [line for line in stub.last_lines if line.strip()][-lines:]
        if tail:
            text += "\n--- its last lines ---\n" + "\n".join(tail)
        parts.append(text)
    return "\n".join(parts)
