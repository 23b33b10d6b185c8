"""Files labkit writes and reads: atomic writes (a reader, Triton mid-load, never sees half a file),
and one line of a source file for reports."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import RepositoryWriteError

_WHAT_TO_DO = {
    errno.EROFS: "the folder is on a read-only file system: give the server a writable repository folder "
    "(e.g. copy this one), or mount it writable",
    errno.EACCES: "this user may not write there: give a folder you own",
    errno.EPERM: "this user may not write there: give a folder you own",
    errno.ENOSPC: "the disk is full: free some space",
    errno.ENAMETOOLONG: "the path is too long for the file system: use a shorter name",
}


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn the file system's refusal (OSError) while writing ``path`` (a file or a folder) into
    RepositoryWriteError naming it."""
    try:
        yield
    except OSError as exc:
        advice = _WHAT_TO_DO.get(exc.errno or 0, "check the folder and try again")
        raise RepositoryWriteError(
            path=str(path), errno=exc.errno or 0, detail=exc.strerror or str(exc), remedy=advice
        ) from None


def write_atomic(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    """Write ``data`` to ``path`` whole or not at all; RepositoryWriteError when the file system refuses."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
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
