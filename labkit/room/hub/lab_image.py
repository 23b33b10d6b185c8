"""The participant image ``labkit/lab:23.12-cpu``: JupyterLab, labkit, embedded Triton 23.12, g++ and the
notebooks, on top of the offline CPU image ``labkit/tritonserver:23.12-cpu``, built with no image registry.

    labkit room image            # minutes the first time; seconds when nothing changed

The recipe:

1. Build labkit's wheel from a copy of this checkout without the reference solutions (``*.solution``):
   the image must not hold them. pip downloads every other wheel (labkit's dependencies, JupyterHub for
   ``jupyterhub-singleuser``, ``nvidia-pytriton`` without its own pins, pip) into a wheelhouse in
   labkit's cache, for the image's Python (Debian 12's 3.11.2), once per set of requirements.
2. Run the CPU image once, with no network, the wheelhouse mounted read-only: ``pip install --no-index``
   from it, add the user ``jovyan`` (uid 1000), the notebooks (``/opt/labkit/notebooks``) and the start
   script, which copies them into the participant's volume at the lab's first start, never over their work;
   and what the real-model lessons need (labkit.room.hub.lab_models): ``examples/real_models``, the models'
   execution environments built from their wheels (fetched into labkit's cache like the wheelhouse),
   espeak-ng and fonts (Debian packages, downloaded once by apt in a throwaway container of the CPU image).
   Its output is shown as it runs.
3. ``docker commit`` that container with a ``labkit.recipe`` label (a hash of every input) and a
   ``labkit.recipe.parts`` label (the hash of each input: labkit's package files, the notebooks, the real
   models, the recipe and the base image); an image whose label matches the tree is reused, any other is
   rebuilt, saying which input changed. The wheelhouses are mounted, not copied: they stay out of the image.

The image's JupyterLab never asks to fetch Jupyter's news or to check for updates (an ``overrides.json``
of its settings), and ``python`` runs ``python3`` in a lab's terminal.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path

import docker.client
import docker.errors
import docker.models.containers

import docker

from ...course.catalogue import ENVIRONMENT_PACKAGES
from ...docker import cpu_image
from ...docker.engine import connect
from ...docker.engine_errors import engine_error
from ...errors import SetupError
from ...plumbing.downloads import cache_dir, fill_once, say
from ..settings import PARTICIPANT_IMAGE
from . import lab_models
from .hubconfig import HOME, START_COMMAND, WORK

RECIPE_VERSION = "3"
RECIPE_LABEL, PARTS_LABEL = "labkit.recipe", "labkit.recipe.parts"
#: What each input of the recipe is called when `room up` says why it rebuilds the image.
PART_NAMES = {
    "labkit": "labkit's package files",
    "notebooks": "the notebooks",
    "examples": "the real models (examples/real_models)",
    "recipe": "the image's recipe",
    "base": "the base image",
}
IMAGE_PYTHON = "3.11.2"  # Debian 12's python3 in the CPU image: wheels must suit it, not the host's Python
HUB_JUPYTERHUB = "6.1"  # `room up`'s hub; the Zero to JupyterHub chart 4.4.0 runs 5.5 (`room image --jupyterhub 5.5`)
EXTRA = (f"jupyterhub=={HUB_JUPYTERHUB}.*", "ipykernel", "pip")  # the hub's major version in each lab; a kernel
KUBERNETES_CLIENT = "kubernetes==37.*"  # in the images for Kubernetes: the board there starts grader Pods
TRITON_WHEEL = "nvidia-pytriton==0.5.0"  # installed without its requirements (they pin JupyterLab 3)
EXCLUDED = ("*.solution", "__pycache__", "*.pyc")  # never in the image: reference solutions, byte code
_PARTICIPANT = "The participant image"  # who needs what a SetupError of the build names
# Wheels for the execution environments the lessons build (labkit.python_env): in the image, not installed,
# found by pip through PIP_FIND_LINKS (the grader has no network; a room's labs may have none either).
LESSON_WHEELS = "/opt/labkit/wheels"
# JupyterLab's settings for every lab: no "Would you like to get notified about official Jupyter news?"
# prompt, no update check (a participant's lab has no business with either, and may have no internet).
LAB_OVERRIDES = json.dumps(
    {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
)

START_SCRIPT = f"""#!/bin/sh
# The lab's entry point: the notebooks go into the participant's volume at its first start only
# (cp -n: a participant's file of the same name is never replaced), then the single-user server.
set -e
work="{WORK}"
if [ ! -e "$work/.labkit-notebooks" ]; then
    cp -Rn /opt/labkit/notebooks/. "$work/"
    date -u > "$work/.labkit-notebooks"
fi
cd "$work"
exec jupyterhub-singleuser "$@"
"""

SETUP_SCRIPT = f"""set -e
echo "labkit, JupyterLab and Triton 23.12 from the wheelhouse"
cd /wheels
python3 "$(ls pip-*.whl)/pip" install --no-index --find-links /wheels --break-system-packages --no-compile \\
    --root-user-action=ignore --no-cache-dir -q /build/labkit-*.whl {" ".join(repr(e) for e in EXTRA)}
python3 -m pip install --no-index --find-links /wheels --break-system-packages --no-compile --no-deps \\
    --root-user-action=ignore --no-cache-dir -q nvidia_pytriton-*.whl
ln -sf /usr/bin/python3 /usr/local/bin/python
settings="$(python3 -c 'from jupyterlab.commands import get_app_dir; print(get_app_dir())')/settings"
mkdir -p "$settings"
cat > "$settings/overrides.json" <<'JSON'
{LAB_OVERRIDES}
JSON
useradd --create-home --uid 1000 --shell /bin/bash jovyan
mkdir -p {WORK} /opt/labkit/notebooks
cp /build/notebooks/*.ipynb /opt/labkit/notebooks/
cp /build/labkit-lab-start {START_COMMAND}
mkdir -p {LESSON_WHEELS}
for package in {" ".join(p.split("==")[0] for p in ENVIRONMENT_PACKAGES)} numpy; do cp /wheels/"$package"-*.whl {LESSON_WHEELS}/; done
{lab_models.SETUP_MODELS}chmod 755 {START_COMMAND}
chown -R jovyan:jovyan {HOME}
rm -rf /root/.cache
"""


def _checkout() -> Path:
    """labkit's source checkout (the image is built from it: the wheel, the notebooks)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").exists() or not (root / "notebooks").is_dir():
        raise SetupError(
            needed_by=_PARTICIPANT,
            missing="a labkit checkout",
            reason="not found",
            detail=f"{root} is not one",
            remedy="Clone labkit and run `labkit room image` there",
        )
    return root


def _sources(root: Path, into: Path) -> None:
    """Copy what labkit's wheel is built from, without the reference solutions."""
    ignore = shutil.ignore_patterns(*EXCLUDED)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, into / name)
    shutil.copytree(root / "labkit", into / "labkit", symlinks=True, ignore=ignore)
    shutil.copytree(root / "model_repository", into / "model_repository", symlinks=True, ignore=ignore)


def _tree_hash(h: hashlib._Hash, folder: Path, skip: tuple[str, ...] = ()) -> None:
    """Every file under ``folder`` into ``h``, by path and content; none of whose path parts matches ``skip``."""
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and not path.is_symlink() and not any(fnmatch(p, s) for p in parts for s in skip):
            h.update(path.relative_to(folder).as_posix().encode())
            h.update(path.read_bytes())


def for_jupyterhub(jupyterhub: str, tag: str = PARTICIPANT_IMAGE) -> tuple[str, tuple[str, ...], str]:
    """(tag, extra packages, setup script) of a lab image for a hub running JupyterHub ``jupyterhub``
    (major.minor): `room up`'s own is ``tag`` itself; another, e.g. 5.5 for Kubernetes, ``<tag>-hub5.5``."""
    if jupyterhub == HUB_JUPYTERHUB:
        return tag, EXTRA, SETUP_SCRIPT
    # another hub is Zero to JupyterHub's: its board (a grader image built on this one) makes Pods
    extra = (f"jupyterhub=={jupyterhub}.*", *EXTRA[1:], KUBERNETES_CLIENT)
    setup = SETUP_SCRIPT.replace(" ".join(repr(e) for e in EXTRA), " ".join(repr(e) for e in extra))
    return f"{tag}-hub{jupyterhub}", extra, setup


def recipe_parts(
    base_id: str,
    sources: Path,
    notebooks: Path,
    examples: Path,
    extra: tuple[str, ...] = EXTRA,
    setup: str = SETUP_SCRIPT,
) -> dict[str, str]:
    """A hash of each input (keys of PART_NAMES): labkit's sources (as copied), the notebooks, the real
    models (``examples``), the recipe (scripts, pinned packages, Debian packages, the image's Python) and the
    base image's id."""
    labkit, shipped, models = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    _tree_hash(labkit, sources)
    _tree_hash(shipped, notebooks)
    _tree_hash(models, examples, EXCLUDED)  # as copied into the image
    recipe = hashlib.sha256(
        json.dumps(
            [RECIPE_VERSION, IMAGE_PYTHON, extra, TRITON_WHEEL, START_SCRIPT, setup, lab_models.DEBIAN_PACKAGES]
        ).encode()
    )
    return {
        "labkit": labkit.hexdigest(),
        "notebooks": shipped.hexdigest(),
        "examples": models.hexdigest(),
        "recipe": recipe.hexdigest(),
        "base": base_id,
    }


def tree_parts(
    base_id: str,
    jupyterhub: str = HUB_JUPYTERHUB,
    *,
    root: Path | None = None,
    notebooks: Path | None = None,
    examples: Path | None = None,
) -> dict[str, str]:
    """recipe_parts of this checkout (``root``; its ``notebooks`` and ``examples/real_models`` unless given)
    for a lab image on the base image ``base_id``: what an image built now would record."""
    root = root or _checkout()
    _, extra, setup = for_jupyterhub(jupyterhub)
    with tempfile.TemporaryDirectory(prefix="labkit-room-image-") as tmp:
        _sources(root, Path(tmp))
        shipped, models = notebooks or root / "notebooks", examples or lab_models.examples_of(root)
        return recipe_parts(base_id, Path(tmp), shipped, models, extra, setup)


def recipe_hash(
    base_id: str,
    sources: Path,
    notebooks: Path,
    examples: Path,
    extra: tuple[str, ...] = EXTRA,
    setup: str = SETUP_SCRIPT,
) -> str:
    """A hash of every input (the image's ``labkit.recipe`` label): see recipe_parts."""
    return _combined(recipe_parts(base_id, sources, notebooks, examples, extra, setup))


def _combined(parts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def rebuild_reason(tag: str, labels: dict[str, str] | None, parts: dict[str, str]) -> str:
    """Why the image ``tag`` (whose labels are ``labels``; None when it is missing) must be built for the
    inputs ``parts``, as a sentence; "" when it matches them."""
    if labels is None:
        return f"{tag} is not on this Docker engine: building it"
    if labels.get(RECIPE_LABEL) == _combined(parts):
        return ""
    try:
        old = json.loads(labels.get(PARTS_LABEL) or "")
    except ValueError:
        old = None
    if not isinstance(old, dict):
        return f"{tag} was built by an older labkit that did not record its inputs: rebuilding it"
    changed = [PART_NAMES.get(key, key) for key in parts if old.get(key) != parts[key]]
    return f"{', '.join(changed) or 'its inputs'} changed since {tag} was built: rebuilding it"


def _labkit_wheel(sources: Path, into: Path) -> Path:
    """labkit's wheel, built from ``sources`` (a copy without the reference solutions), checked for them."""
    say("room image: building labkit's wheel (without the reference solutions) ...")
    lab_models.pip(["wheel", "-q", "--no-deps", "-w", str(into), str(sources)], "build labkit's wheel")
    wheel = next(into.glob("labkit-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        leaked = [n for n in archive.namelist() if n.endswith(".solution")]
    if leaked:
        raise SetupError(
            needed_by=_PARTICIPANT,
            missing="labkit's wheel without reference solutions",
            reason="solutions in the wheel",
            detail=", ".join(leaked[:3]),
            remedy=f"Check the EXCLUDED patterns of {Path(__file__).name} against these files; nothing was built",
        )
    return wheel


def _requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode()
    return sorted(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:"))


def _wheelhouse(wheel: Path, extra: tuple[str, ...] = EXTRA) -> Path:
    """Every other wheel the image installs, downloaded once per set of requirements into labkit's cache
    (a change to labkit's code alone reuses it); one per hub version (``extra``'s jupyterhub)."""
    # "whole": folders are filled whole then renamed (fill_once); earlier ones, maybe half filled, get a new key
    key = hashlib.sha256(
        json.dumps([_requirements(wheel), extra, TRITON_WHEEL, IMAGE_PYTHON, ENVIRONMENT_PACKAGES, "whole"]).encode()
    ).hexdigest()
    variant = "" if extra == EXTRA else f"hub{extra[0].split('==')[1].rstrip('.*')}-"
    house = cache_dir() / "room" / f"wheelhouse-{variant}{key[:12]}"

    def download(partial: Path) -> None:
        say(f"room image: downloading wheels for Python {IMAGE_PYTHON} into {house} (about 230 MB, once) ...")
        wanted = [str(wheel), *extra, *ENVIRONMENT_PACKAGES]
        options = ["-q", "--only-binary=:all:", f"--python-version={IMAGE_PYTHON}", "-d", str(partial)]
        lab_models.pip(["download", *options, *wanted], "download the lab's wheels")
        lab_models.pip(["download", *options, "--no-deps", TRITON_WHEEL], f"download {TRITON_WHEEL}")
        for copy in partial.glob("labkit-*.whl"):  # labkit's own wheel is built fresh for each image
            copy.unlink()

    fill_once(house, download)
    # earlier requirements' wheelhouses (about 230 MB each) go; another hub version's are kept
    lab_models.drop_older(house, f"wheelhouse-{variant}", spare="" if variant else "wheelhouse-hub")
    return house


def image_state(tag: str = PARTICIPANT_IMAGE, client: docker.client.DockerClient | None = None) -> str | None:
    """The ``labkit.recipe`` label of the local image ``tag``, or None when it is missing."""
    return cpu_image.image_recipe(tag, client)


def _run_setup(
    client: docker.client.DockerClient, base: str, mounted: dict[str, Path]
) -> docker.models.containers.Container:
    """The set-up container, run to its end with ``mounted`` (path in it: folder here) read-only and its
    output shown line by line; SetupError with its last lines when it fails."""
    fetched = ", ".join(str(here) for inside, here in mounted.items() if inside != "/build")
    container = client.containers.create(
        base,
        ["sh", "/build/setup.sh"],
        user="root",
        network_disabled=True,
        # Mounts, not volumes=: docker-py also lists volumes= in the container's config, which `commit`
        # would keep as VOLUME /wheels and /build, an anonymous volume for every lab and grader container.
        mounts=[docker.types.Mount(inside, str(here), type="bind", read_only=True) for inside, here in mounted.items()],
    )
    try:
        container.start()
        for line in _lines(container.logs(stream=True, follow=True)):
            say(f"room image:   {line}")
        code = container.wait().get("StatusCode", 1)
    except BaseException:  # Ctrl-C, or the engine failing: leave no build container behind
        container.remove(force=True)
        raise
    if code != 0:
        tail = container.logs(tail=40).decode(errors="replace")
        container.remove(force=True)
        raise SetupError(
            missing="participant image",
            reason="setup failed",
            detail=f"exit {code}\n{tail}",
            remedy=f"Read the set-up's last lines; remove {fetched} to download the wheels and packages again",
        )
    return container


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The non-empty lines of a container's streamed output, each as soon as it is whole."""
    pending = ""
    for chunk in chunks:
        pending += chunk.decode(errors="replace")
        *whole, pending = pending.split("\n")
        yield from (line.rstrip() for line in whole if line.strip())
    if pending.strip():
        yield pending.rstrip()


def build_image(
    force: bool = False, *, tag: str = PARTICIPANT_IMAGE, base: str = cpu_image.IMAGE, jupyterhub: str = HUB_JUPYTERHUB
) -> cpu_image.ImageBuild:
    """Build the participant image (see the module's docstring); reused when its recipe is unchanged.
    ``jupyterhub``: the hub's JupyterHub (major.minor) the lab must match; not `room up`'s own (6.1) tags
    the image ``<tag>-hub<version>`` (`labkit room k8s` names ``-hub5.5``, the chart's)."""
    t0 = time.perf_counter()
    tag, extra, setup = for_jupyterhub(jupyterhub, tag)
    root = _checkout()
    client = connect(timeout=900)
    try:
        try:
            base_id = client.images.get(base).id
        except docker.errors.ImageNotFound:
            raise SetupError(
                needed_by=_PARTICIPANT,
                missing=base,
                reason="not built",
                remedy="Build it first with `labkit image build`",
            ) from None
        with tempfile.TemporaryDirectory(prefix="labkit-room-image-") as tmp:
            sources, build = Path(tmp) / "src", Path(tmp) / "build"
            sources.mkdir()
            _sources(root, sources)
            examples = lab_models.examples_of(root)
            parts = recipe_parts(base_id, sources, root / "notebooks", examples, extra, setup)
            recipe = _combined(parts)
            why = rebuild_reason(tag, _labels(client, tag), parts)
            if not force and not why:
                image = client.images.get(tag)
                return cpu_image.ImageBuild(
                    tag, image.id, recipe, image.attrs["Size"] / 1e6, time.perf_counter() - t0, True
                )
            say(f"room image: {why or 'rebuilding it, as asked (--force)'}")
            shutil.copytree(
                root / "notebooks",
                build / "notebooks",
                ignore=shutil.ignore_patterns("*.py", "*.cfg", "__pycache__", ".ipynb_checkpoints"),
            )
            shutil.copytree(examples, build / "examples" / "real_models", ignore=shutil.ignore_patterns(*EXCLUDED))
            house = _wheelhouse(_labkit_wheel(sources, build), extra)
            mounted = {
                "/wheels": house,
                "/build": build,
                lab_models.WHEELS_MOUNT: lab_models.model_wheelhouse(examples, IMAGE_PYTHON),
                lab_models.DEBS_MOUNT: lab_models.debian_packages(client, base, base_id),
            }
            (build / "setup.sh").write_text(setup)
            (build / "labkit-lab-start").write_text(START_SCRIPT)
            say(f"room image: installing into {base} (two or three minutes) ...")
            container = _run_setup(client, base, mounted)
        return _commit(client, container, tag, parts, t0)
    except docker.errors.APIError as exc:
        raise engine_error(
            exc, f"run a step of building {tag}", "Check its free disk space (`docker system df`)"
        ) from None
    finally:
        client.close()


def _labels(client: docker.client.DockerClient, tag: str) -> dict[str, str] | None:
    """The labels of the local image ``tag``; None when it is missing."""
    try:
        return dict(client.images.get(tag).labels or {})
    except docker.errors.ImageNotFound:
        return None


def _commit(
    client: docker.client.DockerClient,
    container: docker.models.containers.Container,
    tag: str,
    parts: dict[str, str],
    t0: float,
) -> cpu_image.ImageBuild:
    recipe = _combined(parts)
    repository, _, version = tag.rpartition(":")
    old = None
    try:
        old = client.images.get(tag).id
    except docker.errors.ImageNotFound:  # a first build
        pass
    labels = {
        RECIPE_LABEL: recipe,
        PARTS_LABEL: json.dumps(parts, sort_keys=True),
        "labkit.release": "23.12",
        "org.opencontainers.image.title": "labkit participant lab (JupyterLab, Triton 23.12 CPU, g++)",
    }
    changes = [
        "USER jovyan",
        f"WORKDIR {WORK}",
        f"ENV HOME={HOME}",
        f"ENV PIP_FIND_LINKS={LESSON_WHEELS}",
        f"ENV XDG_CACHE_HOME={lab_models.CACHE}",
        f'CMD ["{START_COMMAND}"]',
        "EXPOSE 8888",
        "LABEL " + " ".join(f"{k}={json.dumps(v)}" for k, v in labels.items()),
    ]
    try:
        image = container.commit(repository=repository, tag=version, changes=changes)
    finally:
        container.remove(force=True)
    if old and old != image.id:
        try:  # the previous build is untagged now: drop it unless a lab still runs it
            client.images.remove(old, noprune=False)
        except docker.errors.APIError:
            pass
    image = client.images.get(tag)
    built = cpu_image.ImageBuild(tag, image.id, recipe, image.attrs["Size"] / 1e6, time.perf_counter() - t0, False)
    say(f"room image: {built}")
    return built
