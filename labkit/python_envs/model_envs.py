"""A model's own packages, declared beside its config.pbtxt in ``requirements.txt`` (pip's format), as
`labkit serve` gives them: an execution environment built once into labkit's cache, keyed by the list, and
unpacked there once, so that later serves start offline and at once.

The list is installed as it stands, ``pip install --no-deps -r requirements.txt``: every package the model
imports is named, each pinned, and nothing is resolved beyond the lines. That is how a wheel whose own
metadata asks for too much is taken alone (rapidocr-onnxruntime asks for the GUI build of OpenCV, silero-vad
for torch), and how a production image pins its packages (`pip freeze` of a venv that works gives the list).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..docker.mounts import container_path
from ..errors import LabkitError, PythonEnvError
from ..plumbing.downloads import cache_dir, fill_once
from ..repository import ModelRepository
from .builder import NUMPY_PIN, cached_build, read_requirements, unpack
from .stub_pythons import StubRuntime, runtime_stubs, version_text

REQUIREMENTS = "requirements.txt"  # beside config.pbtxt
PARAMETER = "EXECUTION_ENV_PATH"  # python_backend's parameter (r23.12 README, "Creating Custom Execution Environments")
IN_CONTAINER = "/labkit/python-envs"  # where an environment is mounted when its own path would hide image files


def requirements_of(model_dir: Path) -> Path | None:
    """The model's requirements.txt, or None when it uses the server's own Python packages."""
    path = Path(model_dir) / REQUIREMENTS
    return path if path.is_file() else None


def model_env(
    requirements: Path,
    *,
    model: str = "",
    progress: Callable[[str], None] | None = print,
    runtime: str = "embedded",
    image: str | None = None,
) -> Path:
    """The unpacked environment (a folder in labkit's cache) for ``requirements``, built on first use for the
    Python of the stub of ``runtime`` (the embedded server's; "docker": ``image``'s, default labkit's CPU
    image). PythonEnvError (``problem="pip"``, ``model``) when pip cannot build it, with pip's last lines: a
    first build needs the package index; later ones need nothing."""
    say = progress or (lambda _line: None)
    text = read_requirements(requirements, model)
    return _env(text, Path(requirements), [model] if model else [], runtime_stubs(runtime, image), say)


def wanted(source: Path, models: Iterable[str] | None = None) -> dict[str, Path]:
    """Each model of ``source`` (or of ``models``) that declares its packages, with its requirements.txt; a
    model whose config.pbtxt names its environment itself is served with that one (nothing is built)."""
    chosen = set(models) if models else None
    repository = ModelRepository(source)
    return {
        name: found
        for name in repository.models()
        if (chosen is None or name in chosen)
        and (found := requirements_of(Path(source) / name))
        and not _names_own_env(repository, name)
    }


def _names_own_env(repository: ModelRepository, name: str) -> bool:
    if not (repository.model_dir(name) / "config.pbtxt").is_file():
        return False
    try:
        return PARAMETER in repository.read_config(name).parameters
    except LabkitError:
        return False  # a config Triton cannot read either: Triton says so when it loads the model


def envs_for(
    source: Path,
    models: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = print,
    *,
    runtime: str = "embedded",
    image: str | None = None,
) -> dict[str, Path]:
    """The environment of each model of ``source`` (or of ``models``) that declares its packages, for the
    stub of ``runtime`` (and ``image``) as in ``model_env``. Models whose lists name the same packages share
    one environment, built or checked once."""
    say = progress or (lambda _line: None)
    found = wanted(source, models)
    if not found:
        return {}  # nothing asked of the runtime (an image labkit does not know is fine then)
    stubs = runtime_stubs(runtime, image)
    groups: dict[tuple[str, ...], list[tuple[str, Path, str]]] = {}
    for name, path in found.items():
        text = read_requirements(path, name)
        groups.setdefault(tuple(_packages(text)), []).append((name, path, text))
    envs: dict[str, Path] = {}
    for members in groups.values():
        _, path, text = members[0]  # the first one's text keys the cache, as model_env of that model would
        env = _env(text, path, [name for name, _, _ in members], stubs, say)
        envs.update((name, env) for name, _, _ in members)
    return {name: envs[name] for name in found}


def container_envs(envs: Mapping[str, Path]) -> tuple[dict[str, str], dict[Path, str]]:
    """For a container: where each model's environment appears in it (at its own path, or under
    /labkit/python-envs/ where that would hide the image's files), and the read-only mounts
    (``{host folder: "path:ro"}``, DockerServer's ``volumes``) that put each environment there once."""
    inside = {env: container_path(env, f"{IN_CONTAINER}/{env.parent.name}") for env in envs.values()}
    return {name: inside[env] for name, env in envs.items()}, {env: f"{path}:ro" for env, path in inside.items()}


def _env(text: str, requirements: Path, models: Sequence[str], stubs: StubRuntime, say: Callable[[str], None]) -> Path:
    # pip reads the list from a file named by its content: the cache's key never depends on where a copy was.
    listing = cache_dir() / "python-envs" / f"requirements-{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
    if not listing.exists():
        listing.parent.mkdir(parents=True, exist_ok=True)
        fill_listing = listing.with_name(f"{listing.name}.partial-{os.getpid()}")
        fill_listing.write_text(text)
        fill_listing.replace(listing)
    named = ", ".join(models) or str(requirements)
    target = f" for {stubs.image} (Python {version_text(stubs.serves)})" if stubs.image else ""
    count = len(_packages(text))
    say(f"environment of {named}: {count} package{'' if count == 1 else 's'} from {requirements}{target}")
    try:
        folder, _cached = cached_build(stubs.serves, stubs, ["--no-deps", "-r", str(listing), NUMPY_PIN], text, say)
    except PythonEnvError as exc:
        if exc.problem != "pip":
            raise
        raise PythonEnvError(
            problem="pip",
            path=str(requirements),
            output=exc.output,
            model=models[0] if models else "",
            detail=f"the environment shared by models {named}" if len(models) > 1 else "",
            remedy=(
                f"labkit builds it once, into {cache_dir() / 'python-envs'}, and serves offline after that; this "
                "first build needs the package index, or a local one that pip is configured for (PIP_INDEX_URL, "
                "PIP_FIND_LINKS). Check the names and versions pip could not find or build (it says which)"
            ),
        ) from None
    return fill_once(folder / "env", lambda partial: _unpack(folder / "env.tar", partial, say))


def _packages(text: str) -> list[str]:
    return [line for line in (raw.split("#", 1)[0].strip() for raw in text.splitlines()) if line]


def _unpack(archive: Path, into: Path, say: Callable[[str], None]) -> None:
    say(f"unpacking it into {into.parent} (once)")
    unpack(archive, into)


def copy_with_envs(target: ModelRepository, source: Path, envs: Mapping[str, Path | str]) -> None:
    """Every model of ``source`` copied into ``target``, each model in ``envs`` given its environment in the
    copy's config (unless its config names one itself): the files in ``source`` stay as they are. ``envs``
    names each environment as the server sees it (``container_envs`` for a container)."""
    for name in ModelRepository(source).models():
        target.copy_model_from(source, name)
        if name in envs and PARAMETER not in target.read_config(name).parameters:
            text = (target.model_dir(name) / "config.pbtxt").read_text()
            target.write_config_text(name, with_env(text, envs[name]))


def with_env(config_text: str, env: Path | str) -> str:
    """``config_text`` with the parameter that gives its model the environment at ``env``."""
    line = f'parameters {{ key: "{PARAMETER}", value: {{ string_value: "{env}" }} }}'
    return f"{config_text.rstrip()}\n# added by labkit serve: the environment built from requirements.txt\n{line}\n"
