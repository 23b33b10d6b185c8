"""Put a built backend in front of Triton at a new path, so a rebuild really reloads.

Triton 2.41 dlopens a backend library once per path and never closes it: a path it has opened
keeps the code it had then, whatever is copied there later, and overwriting a library the server
has mapped crashes the server. So a library is only ever copied to a path that holds no file and
that the running Triton process has not opened: a new version folder of every model that uses it
(Triton looks for libtriton_<backend>.so in <model>/<version>/ first). The default version policy
serves the newest; older version folders are removed once the new one is serving. A failed load
also opens the library, so its path is never used again by that process. An empty version folder
is filled in place, so a first install keeps the repository's own version folder (a checked-in
`1/` stays `1/`).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError, ModelLoadError
from ..repository import ModelRepository
from .build import REFERENCE_DIR, Build, reference_source

#: The model-config parameter Triton 23.12 reads a custom batching strategy's library path from
#: (backend r23.12 examples/README.md; without it Triton looks for batchstrategy.so beside the model).
BATCH_STRATEGY_PARAMETER = "TRITON_BATCH_STRATEGY_PATH"


class _Runtime(Protocol):
    @property
    def run_id(self) -> str: ...  # changes with every Triton process


class Target(Protocol):
    """What deploying needs of a server: its models component (``server.models``) has it all.

    Read-only members: deploying only reads them, and a server's ``models`` exposes them as properties."""

    @property
    def repository(self) -> ModelRepository: ...

    @property
    def runtime(self) -> _Runtime: ...

    def load(self, name: str) -> None: ...

    def build(self, backend: str, source: str | Path | list[str | Path], **options: Any) -> Build: ...


# Library paths each Triton process (by run_id) has dlopened: it never closes them.
_opened: defaultdict[str, set[str]] = defaultdict(set)


def opened_libraries(into: Target) -> set[str]:
    """The backend library paths the server's current process has loaded (and will never reload)."""
    return _opened[into.runtime.run_id]


def install(into: Target, build: Build, model: str) -> int:
    """Copy the library into a new version folder of ``model`` and load it; returns that version.

    If Triton refuses the new version, the copy is removed again (the previous version keeps
    serving) and the error raised.
    """
    repo = into.repository
    opened = opened_libraries(into)
    versions = repo.versions(model)
    version = _free_version(into, model, build.library.name)
    target = repo.model_dir(model) / str(version)
    fresh_folder = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    library = target / build.library.name
    shutil.copy2(build.library, library)
    repo.mark_changed(model)
    try:
        into.load(model)
    except ModelLoadError:
        if fresh_folder:
            shutil.rmtree(target, ignore_errors=True)
        else:
            library.unlink(missing_ok=True)
        raise
    finally:
        opened.add(str(library))  # Triton may have dlopened it even if the load failed
    for v in versions:
        if v != version:
            repo.remove_version(model, v)
    return version


def _free_version(into: Target, model: str, library_name: str) -> int:
    """The version to install into: the newest folder if it is empty, else the first number above it
    whose library path holds no file and was never opened by the running Triton process. An existing
    library may be mapped by the server (loaded at a restart, or by a plain ``load``): never overwrite one."""
    opened = opened_libraries(into)
    folder = into.repository.model_dir(model)
    versions = into.repository.versions(model)
    if (
        versions
        and not (folder / str(versions[-1]) / library_name).exists()
        and str(folder / str(versions[-1]) / library_name) not in opened
    ):
        return versions[-1]
    version = max(versions, default=0) + 1
    while str(folder / str(version) / library_name) in opened:
        version += 1
    return version


def load_models(into: Target, models: list[str]) -> None:
    """Load models, first building (or taking from the build cache) the C++ backend of each that
    names a reference backend (minimal, recommended, custom) and installing it at a new path.

    For labkit's own reference repository (or a person who asks: ``labkit serve
    --build-reference-backends``) only: it writes libraries into the models' version folders, and
    serves labkit's reference code for those backend names. A person's repository is loaded as it is."""
    repo = into.repository
    builds: dict[str, Build] = {}
    for model in models:
        if not (repo.model_dir(model) / "config.pbtxt").exists():  # auto-complete makes its config
            into.load(model)
            continue
        backend = repo.read_config(model).backend
        if (REFERENCE_DIR / backend).is_dir():
            if backend not in builds:
                builds[backend] = into.build(backend, reference_source(backend))
            install(into, builds[backend], model)
        else:
            into.load(model)


def attach_batch_strategy(
    repository: ModelRepository, model: str, strategy: Build, parameters: dict[str, str] | None = None
) -> Path:
    """Put a batching-strategy library (a build exporting the five TRITONBACKEND_ModelBatch* functions)
    where Triton 23.12 looks for it: copied into ``model``'s folder under a name holding the build's
    digest (Triton never closes a library it opened, so a rebuild needs a path of its own), and named in
    the model's config as ``parameters { key: "TRITON_BATCH_STRATEGY_PATH" ... }``, with ``parameters``
    (e.g. the strategy's own settings) beside it. The model must use dynamic batching (Triton consults
    the strategy only then). Returns the library's path; (re)load the model for it to take effect."""
    cfg = repository.read_config(model)
    if not cfg.HasField("dynamic_batching"):
        raise ConfigError(
            problem=(
                f"model {model!r} has no dynamic_batching, and Triton consults a batching strategy only while it "
                "forms dynamic batches"
            ),
            remedy="add dynamic_batching { } to its config first",
            field="dynamic_batching",
            lacks=["dynamic_batching"],
            source=model,
        )
    target = repository.model_dir(model) / f"{strategy.backend}-{strategy.digest[:16]}.so"
    if not target.exists():
        shutil.copy2(strategy.library, target)
    cfg.parameters[BATCH_STRATEGY_PARAMETER].string_value = str(target)
    for key, value in (parameters or {}).items():
        cfg.parameters[key].string_value = str(value)
    repository.write_config(cfg)
    return target


def into_backend_directory(build: Build, directory: str | Path) -> Path:
    """Copy a build to ``directory/<backend>/libtriton_<backend>.so``, Triton's backend-directory layout
    (what ``--backend-directory`` and ``labkit serve --backend-directory`` read). Nothing else in
    ``directory`` is touched; the file is replaced by a rename, so a server that has the old one open
    keeps it. Returns the library's path."""
    folder = Path(directory) / build.backend
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / build.library.name
    partial = folder / f".{build.library.name}.partial"
    shutil.copy2(build.library, partial)
    partial.replace(target)
    return target
