"""Names that become paths inside a repository: refused before anything is written if they could escape it."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from ..errors import InvalidNameError

# Triton accepts more, but these are safe as a path segment and in a URL on every platform.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
#: File systems allow 255 bytes a name; labkit's atomic writes add up to 14 (".NAME.xxxxxxxx.tmp").
MAX_NAME = 200


def check_name(name: str, what: str = "model") -> str:
    if not isinstance(name, str) or not name:
        raise InvalidNameError(
            name=str(name or ""), what=what, problem="has an empty name", remedy="give a name like 'add_sub'"
        )
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidNameError(
            name=name,
            what=what,
            problem="is not an allowed name",
            remedy=(
                "use letters, digits, '_', '-' and '.', not starting with '.' or '-', and no '/' (it must stay "
                "inside the repository)"
            ),
        )
    if len(name) > MAX_NAME:
        raise InvalidNameError(
            name=name,
            what=what,
            problem=f"has a name {len(name)} characters long; file systems allow names of {MAX_NAME} here",
            remedy="use a shorter one",
        )
    return name


def check_relpath(relpath: str) -> PurePosixPath:
    """A file path relative to a model or version directory, with no way out of it."""
    path = PurePosixPath(relpath)
    if not relpath or path.is_absolute() or any(part in ("", ".", "..") for part in path.parts):
        raise InvalidNameError(
            name=str(relpath),
            what="file path",
            problem="is not allowed",
            remedy="give a relative path without '..', e.g. 'model.py'",
        )
    for part in path.parts:
        check_name(part, "file")
    return path
