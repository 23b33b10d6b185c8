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
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import PythonEnvError
from ..plumbing.downloads import cache_dir, fill_once
from ..repository import ModelRepository
from .builder import NUMPY_PIN, cached_build, read_requirements
from .stub_pythons import runtime_stubs

REQUIREMENTS = "requirements.txt"  # beside config.pbtxt
PARAMETER = "EXECUTION_ENV_PATH"  # python_backend's parameter (r23.12 README, "Creating Custom Execution Environments")


def requirements_of(model_dir: Path) -> Path | None:
    """The model's requirements.txt, or None when it uses the server's own Python packages."""
    path = Path(model_dir) / REQUIREMENTS
    return path if path.is_file() else None


def model_env(requirements: Path, *, model: str = "", progress: Callable[[str], None] | None = print) -> Path:
    """The unpacked environment (a folder in labkit's cache) for ``requirements``, built on first use for the
    Python of the embedded server's stub. PythonEnvError (``problem="pip"``, ``model``) when pip cannot build
    it, with pip's last lines: a first build needs the package index; later ones need nothing."""
    say = progress or (lambda _line: None)
    text = read_requirements(requirements, model)
    # pip reads the list from a file named by its content: the cache's key never depends on where a copy was.
    listing = cache_dir() / "python-envs" / f"requirements-{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
    if not listing.exists():
        listing.parent.mkdir(parents=True, exist_ok=True)
        fill_listing = listing.with_name(f"{listing.name}.partial")
        fill_listing.write_text(text)
        fill_listing.replace(listing)
    stubs = runtime_stubs("embedded", None)
    say(f"environment of {model or requirements}: {len(_packages(text))} packages from {requirements}")
    try:
        folder, _cached = cached_build(stubs.serves, stubs, ["--no-deps", "-r", str(listing), NUMPY_PIN], text, say)
    except PythonEnvError as exc:
        if exc.problem != "pip":
            raise
        raise PythonEnvError(
            f"The environment of model {model!r} could not be built from {requirements}: pip could not install "
            f"its packages. labkit builds it once, into {cache_dir() / 'python-envs'}, and serves offline after "
            f"that; this first build needs the package index (or a local one that pip is configured for: "
            f"PIP_INDEX_URL, PIP_FIND_LINKS). pip said:\n{exc.output[-1500:]}",
            problem="pip",
            path=str(requirements),
            output=exc.output,
            model=model,
        ) from None
    return fill_once(folder / "env", lambda partial: _unpack(folder / "env.tar", partial, say))


def wanted(source: Path, models: Iterable[str] | None = None) -> dict[str, Path]:
    """Each model of ``source`` (or of ``models``) that declares its packages, with its requirements.txt."""
    chosen = set(models) if models else None
    return {
        name: found
        for name in ModelRepository(source).models()
        if (chosen is None or name in chosen) and (found := requirements_of(Path(source) / name))
    }


def envs_for(
    source: Path, models: Iterable[str] | None = None, progress: Callable[[str], None] | None = print
) -> dict[str, Path]:
    """The environment of each model of ``source`` (or of ``models``) that declares its packages."""
    return {name: model_env(path, model=name, progress=progress) for name, path in wanted(source, models).items()}


def _packages(text: str) -> list[str]:
    return [line for line in (raw.split("#", 1)[0].strip() for raw in text.splitlines()) if line]


def _unpack(archive: Path, into: Path, say: Callable[[str], None]) -> None:
    say(f"unpacking it into {into.parent} (once)")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="tar")


def copy_with_envs(target: ModelRepository, source: Path, envs: dict[str, Path]) -> None:
    """Every model of ``source`` copied into ``target``, each model in ``envs`` given its environment in the
    copy's config (unless its config names one itself): the files in ``source`` stay as they are."""
    for name in ModelRepository(source).models():
        target.copy_model_from(source, name)
        if name in envs and PARAMETER not in target.read_config(name).parameters:
            text = (target.model_dir(name) / "config.pbtxt").read_text()
            target.write_config_text(name, with_env(text, envs[name]))


def with_env(config_text: str, env: Path) -> str:
    """``config_text`` with the parameter that gives its model the environment at ``env``."""
    line = f'parameters {{ key: "{PARAMETER}", value: {{ string_value: "{env}" }} }}'
    return f"{config_text.rstrip()}\n# added by labkit serve: the environment built from requirements.txt\n{line}\n"
