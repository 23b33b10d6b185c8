"""The grader image: the participant image plus labkit's whole package (the checks and the reference
solutions) and the pristine notebooks, built when missing or when any of that changed (a recipe label).
What the real-model lessons need (the models, their environments, espeak-ng and fonts) comes with the
participant image (labkit.room.hub.lab_models), so a grader serves them as a lab does, offline."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Any

import docker.errors

from ...course.catalogue import NOTEBOOKS
from ...docker.engine_errors import engine_error
from ...errors import SetupError
from ..settings import GRADER_IMAGE, PARTICIPANT_IMAGE

HOME_IN_IMAGE = "/opt/labkit-grader"  # labkit with its solutions, and the pristine notebooks beside it
RECIPE_LABEL = "labkit.grader.recipe"
# the lesson models' environments in the participant image (labkit.room.hub.lab_models.CACHE; not imported:
# the grader's own start would import what builds them)
LESSON_CACHE = "/opt/labkit/cache"
PACKAGE = Path(__file__).resolve().parents[2]  # labkit/, whose whole package the image holds


def _context_files() -> dict[str, bytes]:
    """labkit's package (solutions included, links followed) and the pristine notebooks, by path in the image."""
    package = PACKAGE
    notebooks = package.parent / "notebooks"
    if not notebooks.is_dir():
        raise SetupError(
            needed_by="The grader image",
            missing=str(notebooks),
            reason="not a checkout",
            detail="it needs labkit's notebooks beside the package",
            remedy="Build it from a checkout of labkit",
        )
    files = {}
    # os.walk, not rglob: labkit/model_repository is a link in a checkout, and rglob does not enter it
    for top, folders, names in os.walk(package, followlinks=True):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(names):
            path = Path(top, name)
            files[f"labkit/{path.relative_to(package)}"] = path.read_bytes()
    for path in sorted(notebooks.glob(NOTEBOOKS)):
        files[f"notebooks/{path.name}"] = path.read_bytes()
    return files


def tar_of(files: dict[str, bytes]) -> bytes:
    """An uncompressed tar of ``files`` (path in the archive: content), readable by anyone, in their order
    (the engine unpacks a build context or a put_archive in that order)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def build_grader_image(client: Any, base: str = PARTICIPANT_IMAGE, tag: str = GRADER_IMAGE) -> str:
    """Build the grader image FROM the participant image ``base``, unless one of this recipe exists. Returns its id."""
    try:
        base_id = client.images.get(base).id
    except docker.errors.ImageNotFound:
        raise SetupError(
            needed_by="The grader image",
            missing=base,
            reason="not built",
            detail="the participant image it is built from",
            remedy="Build that first (`labkit room up` does)",
        ) from None
    files = _context_files()
    # compiled once here: the folders are read-only to the grader's user, and each grader run would otherwise
    # compile every module it imports, in each of its processes (the grader, its kernel, Triton's stubs). The
    # participant image installs its packages without bytecode (--no-compile: a smaller image); compiled, a
    # run costs about a core-second less. A file that does not compile (a package's Python 2 test) stays source.
    files["Dockerfile"] = (
        f"FROM {base}\nCOPY labkit {HOME_IN_IMAGE}/labkit\nCOPY notebooks {HOME_IN_IMAGE}/notebooks\n"
        f"USER root\nRUN python3 -m compileall -q {HOME_IN_IMAGE}/labkit && (python3 -m compileall -q -j 0 "
        f"$(python3 -c 'import site; print(*site.getsitepackages())') {LESSON_CACHE} > /dev/null || true)\n"
        "USER 1000\n"
        # no network in a grader: pip (labkit.python_env) takes the lesson wheels the lab image carries
        f"ENV PYTHONPATH={HOME_IN_IMAGE} PYTHONDONTWRITEBYTECODE=1 PIP_NO_INDEX=1\n"
    ).encode()
    digest = hashlib.sha256(base_id.encode())
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    recipe = digest.hexdigest()
    try:
        current = client.images.get(tag)
        if current.labels.get(RECIPE_LABEL) == recipe:
            return current.id
    except docker.errors.ImageNotFound:
        pass
    for same in client.images.list(filters={"label": f"{RECIPE_LABEL}={recipe}"}):
        same.tag(tag)  # built before under another name: the same image
        return same.id
    try:
        image, _ = client.images.build(
            fileobj=io.BytesIO(tar_of(files)), custom_context=True, tag=tag, rm=True, labels={RECIPE_LABEL: recipe}
        )
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise engine_error(
            exc, f"build the grader image {tag}", f"Check that {base} runs python3 with labkit's requirements"
        ) from None
    return image.id
