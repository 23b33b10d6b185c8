"""Put a built backend in front of Triton at a new path, so a rebuild really reloads.

Triton 2.41 dlopens a backend library once per path and never closes it: rebuilding in place keeps
the old code running. Each build therefore goes into a new version folder of every model that uses
it (Triton looks for libtriton_<backend>.so in <model>/<version>/ first); the default version
policy serves the newest, and older version folders are removed once the new one is serving.
A path this server process has never loaded is safe to fill in place, so a first install keeps the
repository's own version folder (a checked-in `1/` stays `1/`).
"""

from __future__ import annotations

import shutil

from ..errors import ModelLoadError
from ..server.base import TritonServer
from .build import Build


def install(server: TritonServer, build: Build, model: str) -> int:
    """Copy the library into a new version folder of ``model`` and load it; returns that version.

    If Triton refuses the new version, its folder is removed again and the error raised.
    """
    repo = server.repository
    versions = repo.versions(model)
    newest = max(versions, default=1)
    in_place = repo.model_dir(model) / str(newest) / build.library.name
    if str(in_place) not in server.loaded_libraries:
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
        server.loaded_libraries.add(str(library))  # Triton may have dlopened it even if the load failed
    for v in old:
        repo.remove_version(model, v)
    return version


def load_models(server: TritonServer, models: list[str]) -> None:
    """Load models, first building the C++ backend of each that names a reference backend
    (minimal, recommended, custom) and lacks its library."""
    from .build import REFERENCE_DIR, reference_source

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
