"""Put a built backend in front of Triton at a new path, so a rebuild really reloads.

Triton 2.41 dlopens a backend library once per path and never closes it: rebuilding in place keeps
the old code running. Each build therefore goes into a new version folder of every model that uses
it (Triton looks for libtriton_<backend>.so in <model>/<version>/ first); the default version
policy serves the newest, and older version folders are removed once the new one is serving.
A path the running Triton process has never loaded is safe to fill in place, so a first install
keeps the repository's own version folder (a checked-in `1/` stays `1/`).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from typing import Protocol

from ..errors import ModelLoadError
from ..repository import ModelRepository
from .build import REFERENCE_DIR, Build, reference_source
from .toolchain import Toolchain


class Server(Protocol):
    """What deploying needs of a labkit server (TritonServer has it all)."""

    repository: ModelRepository
    run_id: str  # changes with every Triton process

    def load(self, name: str) -> None: ...

    def build(self, backend: str, source: object, **options: object) -> Build: ...

    def toolchain(self) -> Toolchain: ...


# Library paths each Triton process (by run_id) has dlopened: it never closes them.
_opened: defaultdict[str, set[str]] = defaultdict(set)


def opened_libraries(server: Server) -> set[str]:
    """The backend library paths the server's current process has loaded (and will never reload)."""
    return _opened[server.run_id]


def install(server: Server, build: Build, model: str) -> int:
    """Copy the library into a new version folder of ``model`` and load it; returns that version.

    If Triton refuses the new version, its folder is removed again and the error raised.
    """
    repo = server.repository
    opened = opened_libraries(server)
    versions = repo.versions(model)
    newest = max(versions, default=1)
    in_place = repo.model_dir(model) / str(newest) / build.library.name
    if str(in_place) not in opened:
        version, old = newest, [v for v in versions if v != newest]
    else:
        version, old = newest + 1, versions
    target = repo.model_dir(model) / str(version)
    fresh_folder = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    library = target / build.library.name
    shutil.copy2(build.library, library)
    repo.mark_changed(model)
    try:
        server.load(model)
    except ModelLoadError:
        if fresh_folder:
            shutil.rmtree(target, ignore_errors=True)
        raise
    finally:
        opened.add(str(library))  # Triton may have dlopened it even if the load failed
    for v in old:
        repo.remove_version(model, v)
    return version


def load_models(server: Server, models: list[str]) -> None:
    """Load models, first building (or taking from the build cache) the C++ backend of each that
    names a reference backend (minimal, recommended, custom) and installing it at a new path."""
    repo = server.repository
    builds: dict[str, Build] = {}
    for model in models:
        backend = repo.read_config(model).backend
        if (REFERENCE_DIR / backend).is_dir():
            if backend not in builds:
                builds[backend] = server.build(backend, reference_source(backend))
            install(server, builds[backend], model)
        else:
            server.load(model)
