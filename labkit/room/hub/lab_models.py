"""What the participant image carries for the real-model lessons (every notebook whose models live in
``examples/real_models``), so that a lab and a grader run them, and judge their exercises, with no network:

- the example repository, at ``REAL_MODELS_IN_IMAGES`` (where the lessons look when labkit is not a
  checkout: labkit.course.lessons.real_models);
- each model's execution environment, built at image build time by labkit's own builder
  (``model_envs.envs_for``) into a labkit cache of the image's own, ``CACHE`` (the image's ``XDG_CACHE_HOME``:
  a lab's home may be a volume that hides anything built into it, and a grader's home is a fresh folder), so
  that a lab or a grader finds them built under the very path it looks at and never builds one;
- Debian's ``espeak-ng`` (the voice detector's test speech) and the fonts Pillow draws the OCR pages with.

Everything is fetched once into labkit's cache on the host and mounted, read-only, into the image's offline
set-up container: the models' wheels with ``pip download --no-deps`` for the image's Python (as model_envs
installs them: the list as it stands, with numpy<2), read by the builder's pip through ``PIP_NO_INDEX`` and
``PIP_FIND_LINKS``; the Debian packages by apt in a throwaway container of the base image that only
downloads (resolved against the image's own release and what it already holds).

    python3 -m labkit.room.hub.lab_models    # in the set-up container: the environments, into CACHE
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import docker.client
import docker.errors

import docker

from ...course.catalogue import REAL_MODELS_IN_IMAGES
from ...errors import SetupError
from ...plumbing.downloads import cache_dir, fill_once, say
from ...python_envs import model_envs
from ...python_envs.builder import NUMPY_PIN

CACHE = "/opt/labkit/cache"  # the image's XDG_CACHE_HOME: labkit's cache (and the models' environments) in it
DEBIAN_PACKAGES = ("espeak-ng", "fonts-dejavu-core", "fonts-liberation")
WHEELS_MOUNT, DEBS_MOUNT = "/model-wheels", "/debs"  # where the set-up container sees the two caches

#: The set-up script's part for the real models (after labkit is installed, before the files are chowned).
SETUP_MODELS = f"""echo "the Debian packages: {" ".join(DEBIAN_PACKAGES)}"
if ls {DEBS_MOUNT}/*.deb >/dev/null 2>&1; then DEBIAN_FRONTEND=noninteractive dpkg -i {DEBS_MOUNT}/*.deb >/dev/null; fi
mkdir -p {Path(REAL_MODELS_IN_IMAGES).parent} {CACHE}
cp -R /build/examples/real_models {REAL_MODELS_IN_IMAGES}
echo "the real models' execution environments (pip from the models' wheelhouse, no network)"
XDG_CACHE_HOME={CACHE} PIP_NO_INDEX=1 PIP_FIND_LINKS={WHEELS_MOUNT} python3 -m labkit.room.hub.lab_models
# the environments share packages (onnxruntime, numpy: about 160 MB): one copy of each identical file
hardlink --ignore-time {CACHE}/labkit/python-envs | sed -n 's/^Saved: */  saved by linking identical files: /p'
XDG_CACHE_HOME={CACHE} python3 -c 'import matplotlib.font_manager'
chown -R 1000:1000 {CACHE}
"""


def pip(args: list[str], what: str) -> None:
    """Run this Python's pip with ``args``; SetupError (``missing=what``) with pip's last lines when it fails."""
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join(line for line in proc.stderr.splitlines() if "is ignored" not in line)[-1500:]
        raise SetupError(
            missing=what,
            reason="pip failed",
            detail=f"exit {proc.returncode}\n{tail}",
            remedy="Check that the package index (or the one pip is configured for) is reachable",
        )


def examples_of(root: Path) -> Path:
    """The checkout's example repository, whose models the image carries."""
    folder = root / "examples" / "real_models"
    if not (folder / "ocr" / "config.pbtxt").is_file():
        raise SetupError(
            needed_by="The participant image",
            missing=str(folder),
            reason="no example models",
            detail="it carries the real models, which this checkout lacks",
            remedy="Check out labkit's examples/ again (git checkout -- examples)",
        )
    return folder


def _lists(examples: Path) -> dict[str, Path]:
    """Each distinct requirements.txt of the models in ``examples`` (models may share one), by its text."""
    return {model_envs.read_requirements(path): path for path in model_envs.wanted(examples).values()}


def model_wheelhouse(examples: Path, python: str) -> Path:
    """The wheels of every model environment of ``examples`` for Python ``python``, downloaded once per set of
    requirement lists into labkit's cache (earlier sets' folders are removed)."""
    lists = _lists(examples)
    key = hashlib.sha256(json.dumps([python, NUMPY_PIN, sorted(lists)]).encode()).hexdigest()[:12]
    house = cache_dir() / "room" / f"model-wheels-{key}"

    def download(partial: Path) -> None:
        say(
            f"room image: downloading the real models' wheels for Python {python} into {house} (about 130 MB, once) ..."
        )
        for path in lists.values():
            pip(
                ["download", "-q", "--no-deps", "--only-binary=:all:", f"--python-version={python}"]
                + ["-d", str(partial), "-r", str(path), NUMPY_PIN],
                f"download the wheels of {path}",
            )

    fill_once(house, download)
    drop_older(house, "model-wheels-")
    return house


_APT = f"""set -e
apt-get update -qq
apt-get install -y -qq --download-only --no-install-recommends -o APT::Sandbox::User=root \\
    -o Dir::Cache::archives={DEBS_MOUNT} {" ".join(DEBIAN_PACKAGES)}
rm -rf {DEBS_MOUNT}/partial {DEBS_MOUNT}/lock
"""


def debian_packages(client: docker.client.DockerClient, base: str, base_id: str) -> Path:
    """The .deb files that DEBIAN_PACKAGES need on top of the image ``base`` (id ``base_id``), downloaded once
    into labkit's cache by apt in a throwaway container of ``base`` (the only step with a network)."""
    key = hashlib.sha256(json.dumps([base_id, DEBIAN_PACKAGES]).encode()).hexdigest()[:12]
    folder = cache_dir() / "room" / f"debs-{key}"

    def download(partial: Path) -> None:
        say(f"room image: downloading {', '.join(DEBIAN_PACKAGES)} with apt in a container of {base} (once) ...")
        container = client.containers.create(
            base, ["sh", "-c", _APT], user="root", mounts=[docker.types.Mount(DEBS_MOUNT, str(partial), type="bind")]
        )
        try:
            container.start()
            code = container.wait().get("StatusCode", 1)
            tail = container.logs(tail=15).decode(errors="replace")
        finally:
            container.remove(force=True)
        if code != 0:
            raise SetupError(
                missing=" ".join(DEBIAN_PACKAGES),
                reason="apt failed",
                detail=f"in a container of {base}, exit {code}\n{tail}",
                remedy=(
                    f"The engine's containers must reach Debian's mirror once (the packages are then kept in {folder}): "
                    "check their network, then try again"
                ),
            )

    fill_once(folder, download)
    drop_older(folder, "debs-")
    return folder


def drop_older(kept: Path, prefix: str, spare: str = "") -> None:
    """Remove the earlier keys' folders beside ``kept`` (names starting with ``prefix``, but not ``spare``); a
    folder another process is still filling (its name has fill_once's suffix, as has its lock) is left to it."""
    for old in kept.parent.glob(f"{prefix}*"):
        if old != kept and not old.suffix and not (spare and old.name.startswith(spare)):
            shutil.rmtree(old, ignore_errors=True)


def _progress(line: str) -> None:
    if not line.startswith("  pip: "):  # the builder's steps; pip's own lines would drown them
        print(f"  {line}", flush=True)


def main() -> int:
    """In the set-up container (XDG_CACHE_HOME=CACHE, pip offline): build every model's environment, drop
    each packed archive (what serves is the unpacked folder; the archive would double the image's share), and
    ask again as a lab will, with pip given no wheels at all: each must be found built, none built again."""
    envs = model_envs.envs_for(Path(REAL_MODELS_IN_IMAGES), progress=_progress)
    for folder in {env.parent for env in envs.values()}:
        (folder / "env.tar").unlink(missing_ok=True)
    os.environ["PIP_FIND_LINKS"] = ""  # with PIP_NO_INDEX: any build now fails instead of passing unseen
    again = model_envs.envs_for(Path(REAL_MODELS_IN_IMAGES), progress=None)
    if again != envs:
        print(f"the environments moved when asked again: {envs} then {again}", file=sys.stderr)
        return 1
    for name, env in sorted(envs.items()):
        print(f"{name:12s} {env}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
