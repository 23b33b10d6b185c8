"""Extracting a tar archive with tarfile's safety filters on every Python labkit runs under. The filters
came in 3.11.4; Debian 12's python3 (3.11.2, the room's images) refuses the ``filter`` argument, so there a
member that would land outside the target folder is refused here instead (written by hand: the standard
library has no such check before 3.11.4)."""

from __future__ import annotations

import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from ..errors import SetupError

_REFETCH = "Fetch the archive again from its source"


def extract(
    tar: tarfile.TarFile,
    into: Path,
    kind: Literal["data", "tar"] = "data",
    members: Iterable[tarfile.TarInfo] | None = None,
) -> None:
    """Extract ``members`` (all by default) into ``into``. ``kind``: tarfile's "data" filter (no links out,
    no device files, no modes beyond the user's) or "tar" (only: nothing lands outside ``into``; a link to an
    absolute path, as a venv's link to its interpreter, stays)."""
    chosen = list(members) if members is not None else tar.getmembers()
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, members=chosen, filter=kind)
        return
    root, name = Path(into).resolve(), str(tar.name)
    for member in chosen:
        target = (root / member.name).resolve()
        if target != root and root not in target.parents:
            raise SetupError(
                missing=name,
                reason="unsafe archive member",
                detail=f"{member.name!r} would land outside {root}; nothing was extracted",
                remedy=_REFETCH,
            )
        if kind == "data" and (member.isdev() or (member.issym() and Path(member.linkname).is_absolute())):
            raise SetupError(
                missing=name,
                reason="unsafe archive member",
                detail=f"{member.name!r} is a device or a link to an absolute path; nothing was extracted",
                remedy=_REFETCH,
            )
    tar.extractall(into, members=chosen)  # noqa: S202 - every member was checked above
