"""The board's copy of each participant's last saved notebook (the whole file, as it read it to judge it), kept
in ``<room dir>/saved/<login>/<notebook path>`` with the save's mtime. `labkit room rehome` restores them
into a lab that had to move to another node (its work volume stayed on a node that never came back).

Each copy is written atomically (a temporary file renamed into place): a reader never sees half of one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath

from ...errors import RoomFileError

FOLDER = "saved"


def _target(room_dir: Path, user: str, notebook: str) -> Path:
    """Where ``user``'s ``notebook`` is kept; RoomFileError for a path that would leave their folder."""
    parts = PurePosixPath(notebook).parts
    if not parts or PurePosixPath(notebook).is_absolute() or ".." in parts or "/" in user or user in ("", ".", ".."):
        raise RoomFileError(path=f"{user}/{notebook}", problem="copy unwritable", detail="not a path in their folder")
    return Path(room_dir, FOLDER, user, *parts)


def keep(room_dir: Path, user: str, notebook: str, data: bytes, mtime: float) -> Path:
    """Write ``data`` as ``user``'s copy of ``notebook``, saved at ``mtime`` (a copy of a newer save stays)."""
    target = _target(room_dir, user, notebook)
    try:
        if target.exists() and target.stat().st_mtime > mtime:
            return target  # a read that raced a newer save: the newer copy stays
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.utime(temporary, (mtime, mtime))
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise RoomFileError(path=str(target), problem="copy unwritable", detail=exc.strerror or str(exc)) from None
    return target


def kept(room_dir: Path, user: str) -> dict[str, Path]:
    """{notebook path in the work folder: its copy} of ``user``'s kept notebooks."""
    top = Path(room_dir, FOLDER, user)
    if not top.is_dir():
        return {}
    return {
        path.relative_to(top).as_posix(): path
        for path in sorted(top.rglob("*.ipynb"))
        if path.is_file() and not path.name.startswith(".")
    }
