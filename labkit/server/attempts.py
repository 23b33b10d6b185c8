"""What became of the latest source written for each model or backend: did it build, did it load.

When a cell's new source does not build or load, Triton keeps the previous version serving. A check
that only asked the server would then judge the old code. Models records every attempt here
(``server.models.attempts[name]``, for the model and for the backend a cell names), so an exercise check
can say "your latest cell did not load" instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import BuildError, LabkitError, ModelLoadError


@dataclass(frozen=True)
class Attempt:
    """The outcome of the latest attempt to serve ``name`` (a model, or a backend) from new source.

    ``digest``: sha256 of that source. ``built``: it compiled (always True for Python). ``loaded``: Triton
    serves it now. ``error``: the first line of why not (empty when it serves)."""

    name: str
    digest: str
    built: bool
    loaded: bool
    error: str = ""

    @property
    def serving(self) -> bool:
        """True when what serves under ``name`` is this latest source."""
        return self.built and self.loaded


def digest(source: str | bytes) -> str:
    return hashlib.sha256(source.encode() if isinstance(source, str) else source).hexdigest()


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def why(exc: LabkitError) -> str:
    """One line saying why an attempt failed: Triton's reason for a load, the compiler's first error."""
    if isinstance(exc, ModelLoadError) and exc.reason:
        return _first_line(exc.reason)
    if isinstance(exc, BuildError) and exc.compiler_output:
        errors = [line for line in exc.compiler_output.splitlines() if "error" in line]
        return _first_line(errors[0] if errors else exc.compiler_output)
    return _first_line(str(exc))


@contextmanager
def recording(
    book: dict[str, Attempt], names: Iterable[str], source_digest: str, *, load: bool = True
) -> Iterator[None]:
    """Record in ``book`` what became of serving ``source_digest`` as each of ``names``: the block
    builds and loads it (a BuildError: not built; any other labkit error: built, not loaded)."""
    names = list(names)
    try:
        yield
    except BuildError as exc:
        for name in names:
            book[name] = Attempt(name, source_digest, built=False, loaded=False, error=why(exc))
        raise
    except LabkitError as exc:
        for name in names:
            book[name] = Attempt(name, source_digest, built=True, loaded=False, error=why(exc))
        raise
    for name in names:
        book[name] = Attempt(
            name,
            source_digest,
            built=True,
            loaded=load,
            error="" if load else "it was written without loading it (--no-load)",
        )
