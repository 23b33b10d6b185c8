"""labkit's cache (``~/.cache/labkit``) and the one way files get into it: a wheel downloaded with pip
(never installed, so its own pins cannot touch the lab's environment), unpacked into a folder that
appears whole or not at all, even when two processes set it up at once."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import SetupError
from . import partials


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "labkit"


def say(text: str) -> None:
    """A set-up progress line. On stderr: it must not mix into a command's or a notebook's results."""
    print(f"labkit: {text}", file=sys.stderr, flush=True)


def system_has(library: str) -> bool:
    """Whether the system's loader already knows ``library`` (then nothing needs fetching or pointing at)."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    if not Path(ldconfig).exists():
        return False
    return library in subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout


def make_executable(path: Path) -> None:
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def pip_download(spec: str, pattern: str, size: str, otherwise: str, options: tuple[str, ...] = ()) -> Path:
    """The wheel ``spec`` in the cache's wheels/ folder (``pattern`` finds it), downloaded once
    (``options`` for pip, e.g. ``--no-binary=:all:`` for a source archive)."""
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(pattern))
    if not found:
        say(f"downloading {spec} ({size}, once) into {wheels} ...")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), *options, spec],
            capture_output=True,
            text=True,
        )
        found = sorted(wheels.glob(pattern))
        if proc.returncode != 0 or not found:
            raise SetupError(
                missing=spec, reason="download failed", detail=proc.stderr.strip()[-800:], remedy=otherwise
            )
    return found[0]


def fill_once(target: Path, fill: Callable[[Path], None]) -> Path:
    """``target``, made by ``fill(folder)`` in a private folder then renamed into place (another
    process doing the same at the same time wins or loses the rename; either way one whole copy stays).
    What a killed process left half filled for ``target`` is removed on the way (``partials``), even when
    another process made ``target`` since."""
    partials.sweep(target)
    if target.exists():
        return target
    with partials.claimed(partials.partial_for(target)) as partial:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        fill(partial)
        try:
            partial.rename(target)
        except OSError:
            if not target.exists():
                raise
    return target
