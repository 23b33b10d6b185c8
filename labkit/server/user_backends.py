"""Backends built outside labkit, served beside labkit's own: each ``<dir>/<name>/`` of a person's
backend folder appears in the server's backend folder (Triton's ``--backend-directory``, which must
stay labkit's: it holds labkit's Python backend) as a folder of labkit's whose entries are links to
the person's files. Nothing is written into the person's folder: what Triton writes beside a backend
(a Python-based backend's ``__pycache__``) lands in labkit's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import BackendClashError, SetupError

MARK = ".labkit-linked"  # in a folder of links labkit made, which the next launch may replace


def unlink_all(backend_dir: Path) -> None:
    """Remove what a previous launch linked in (a person's backends, or a container image's)."""
    if not backend_dir.is_dir():
        return
    for entry in backend_dir.iterdir():
        if entry.is_symlink() and entry.name != "python":
            entry.unlink()
        elif entry.is_dir() and (entry / MARK).exists():
            shutil.rmtree(entry)


def link(backend_dir: Path, source: str | Path | None, seen_as: str | None = None) -> list[str]:
    """Link each backend folder of ``source`` into ``backend_dir``; returns their names. ``seen_as``:
    where Triton sees ``source`` (a container's mount), when not at the same path. A name labkit's
    folder already holds (``python``, a backend written from a notebook) raises BackendClashError."""
    unlink_all(backend_dir)
    if source is None:
        return []
    folder = Path(source).expanduser().resolve()
    if not folder.is_dir():
        raise SetupError(
            needed_by="--backend-directory",
            missing=str(folder),
            reason="no such folder",
            remedy="give --backend-directory a folder holding <backend>/libtriton_<backend>.so",
        )
    names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    for name in names:
        if name == "python" or (backend_dir / name).exists():
            raise BackendClashError(backend=name, directory=str(folder))
    for name in names:
        mine = backend_dir / name
        mine.mkdir(parents=True)
        (mine / MARK).write_text(f"{folder / name}\n")
        for entry in (folder / name).iterdir():
            if entry.name != "__pycache__":
                target = f"{seen_as}/{name}/{entry.name}" if seen_as else entry
                (mine / entry.name).symlink_to(target, target_is_directory=entry.is_dir())
    return names
