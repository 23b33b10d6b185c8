"""Files labkit writes and reads: atomic writes (a reader, Triton mid-load, never sees half a file),
and one line of a source file for reports."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def source_line(path: str | Path, line: int) -> str:
    """Line ``line`` (from 1) of a text file, stripped; "" where it cannot be read (e.g. a path that
    exists only inside a container)."""
    try:
        return Path(path).read_text().splitlines()[line - 1].strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""
