"""Backends built outside labkit, served beside labkit's own: each ``<dir>/<name>/`` of a person's
backend folder is linked into the server's backend folder (Triton's ``--backend-directory``, which
must stay labkit's: it holds labkit's Python backend). Nothing is written into the person's folder."""

from __future__ import annotations

from pathlib import Path

from ..errors import BackendClashError, SetupError


def unlink_all(backend_dir: Path) -> None:
    """Remove the links a previous launch made (a person's backends, or a container image's)."""
    if backend_dir.is_dir():
        for entry in backend_dir.iterdir():
            if entry.is_symlink() and entry.name != "python":
                entry.unlink()


def link(backend_dir: Path, source: str | Path | None, seen_as: str | None = None) -> list[str]:
    """Link each backend folder of ``source`` into ``backend_dir``; returns their names. ``seen_as``:
    where Triton sees ``source`` (a container's mount), when not at the same path. A name labkit's
    folder already holds (``python``, a backend written from a notebook) raises BackendClashError."""
    unlink_all(backend_dir)
    if source is None:
        return []
    folder = Path(source).expanduser().resolve()
    if not folder.is_dir():
        raise SetupError(f"No backend folder at {folder}; give --backend-directory a folder holding "
                         f"<backend>/libtriton_<backend>.so.", missing=str(folder), reason="no such folder")
    names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    for name in names:
        if name == "python" or (backend_dir / name).exists():
            raise BackendClashError(backend=name, directory=str(folder))
    backend_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        (backend_dir / name).symlink_to(f"{seen_as}/{name}" if seen_as else folder / name, target_is_directory=True)
    return names
