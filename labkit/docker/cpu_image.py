"""The offline CPU image ``labkit/tritonserver:23.12-cpu``, built with no image registry.

    from labkit.docker.cpu_image import build_image
    build_image()          # about 2 min the first time; seconds when nothing changed (`labkit image build`)

The recipe (also described in docker/README.md):

1. ``debootstrap --variant=minbase`` a Debian 12 (bookworm) root file system from Debian's
   mirror, with Python 3.11 + numpy 1.24 (< 2, which the 23.12 Python backend needs),
   ``libpython3.11`` (the Python backend stub links it) and g++/make (C++ backends are
   compiled inside the container they run in). Documentation, manuals, locales and apt's
   caches are removed; ``elfutils`` brings eu-stack, which shows where a stuck C++ backend thread
   is. This root file system is cached under ``~/.cache/labkit/image/``.
2. Copy the real Triton 2.41.0 (release 23.12) from the ``nvidia-pytriton==0.5.0`` wheel into
   ``/opt/tritonserver`` with the layout of NGC's image: ``bin/tritonserver``, ``lib/`` (the
   wheel's ``nvidia_pytriton.libs``), ``backends/python/`` (``libtriton_python.so``,
   ``triton_python_backend_utils.py`` and the Python 3.11 stub) and ``caches/``.
3. ``docker import`` the tree with ``LD_LIBRARY_PATH=/opt/tritonserver/lib`` and ``PATH``, and a
   ``labkit.recipe`` label holding a hash of every input. An image whose label matches is reused
   as it is; change an input (packages, the wheel, this recipe) and it is rebuilt.

Building needs root (debootstrap does), a reachable Docker engine, and Debian's mirror.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker.client
import docker.errors
from filelock import FileLock

import docker

from ..errors import SetupError
from ..plumbing import triton_dist
from .engine import connect
from .engine_errors import engine_error

#: Its tag; LABKIT_CPU_IMAGE names another (a workshop's own tag, or a test's image that is not built).
IMAGE = os.environ.get("LABKIT_CPU_IMAGE", "labkit/tritonserver:23.12-cpu")
SUITE = "bookworm"
MIRROR = os.environ.get("LABKIT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# python3-numpy is 1.24 in bookworm (numpy 2 breaks the 23.12 Python backend).
# elfutils: eu-stack, for the live stack of a stuck C++ backend (labkit.stuck.native_stack).
PACKAGES = ("python3", "python3-numpy", "libpython3.11", "g++", "make", "ca-certificates", "elfutils")
PYTHON_VERSION = (3, 11)  # bookworm's python3; the stub copied in must match it
TRITON_ROOT = "/opt/tritonserver"
# Bump when the steps below change in a way the hash of the inputs would not notice.
RECIPE_VERSION = "1"
#: Who needs what a SetupError of the build names.
_BUILDING = "Building the CPU image"

ENV = {
    "PATH": f"{TRITON_ROOT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LD_LIBRARY_PATH": f"{TRITON_ROOT}/lib",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}

# Removed from the root file system to keep the image small (copyright files stay).
_TRIM = (
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "usr/share/linda",
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "var/cache/debconf/templates.dat-old",
    "var/log",
    "var/cache/ldconfig/aux-cache",
)
# Single files removed: GCC's link-time optimizer and its dump tool (62 MB; -flto is not supported in
# the image). Every container start copies the image on the vfs storage driver, so size is start time.
_DROP = (
    "usr/lib/gcc/x86_64-linux-gnu/12/lto1",
    "usr/bin/x86_64-linux-gnu-lto-dump-12",
    "usr/bin/lto-dump-12",
)


@dataclass(frozen=True)
class ImageBuild:
    """What ``build_image`` produced (or found)."""

    tag: str
    id: str
    recipe: str  # the hash of the inputs, also the image's labkit.recipe label
    size_mb: float
    seconds: float
    reused: bool

    def __str__(self) -> str:
        how = "reused (recipe unchanged)" if self.reused else f"built in {self.seconds:.0f} s"
        return f"{self.tag} {self.id[7:19]} {self.size_mb:.0f} MB, {how}"


def _work_dir() -> Path:
    return triton_dist.cache_dir() / "image"


def _say(progress: bool, text: str) -> None:
    if progress:
        print(f"labkit image: {text}", file=sys.stderr, flush=True)


# -- inputs and their hash ----------------------------------------------------------------------


def _triton_files(dist: triton_dist.TritonDist) -> dict[str, Path]:
    """Image path (relative to /) -> host file, for every Triton file the image takes from the wheel."""
    root = TRITON_ROOT.lstrip("/")
    files = {f"{root}/bin/tritonserver": dist.binary}
    for lib in sorted(dist.lib_dir.iterdir()):
        if lib.is_file():
            files[f"{root}/lib/{lib.name}"] = lib
    for f in sorted(dist.python_backend_dir.iterdir()):
        if f.is_file():
            files[f"{root}/backends/python/{f.name}"] = f
    files[f"{root}/backends/python/triton_python_backend_stub"] = dist.stub_for(PYTHON_VERSION)
    caches = dist.server_dir / "caches"
    if caches.is_dir():
        for f in sorted(caches.rglob("*")):
            if f.is_file():
                files[f"{root}/caches/{f.relative_to(caches).as_posix()}"] = f
    return files


def _base_hash() -> str:
    """The hash of what debootstrap produces: suite, mirror, packages, trimming."""
    text = json.dumps([RECIPE_VERSION, SUITE, MIRROR, PACKAGES, _TRIM, _DROP])
    return hashlib.sha256(text.encode()).hexdigest()


def recipe_hash(dist: triton_dist.TritonDist | None = None) -> str:
    """A hash of every input of the image: the base system, the Triton files (by content), ENV."""
    dist = dist or triton_dist.locate()
    h = hashlib.sha256()
    h.update(_base_hash().encode())
    h.update(json.dumps(ENV, sort_keys=True).encode())
    for target, source in _triton_files(dist).items():
        h.update(target.encode())
        with open(source, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


# -- the Docker side ------------------------------------------------------------------------------


def image_recipe(tag: str = IMAGE, client: docker.client.DockerClient | None = None) -> str | None:
    """The ``labkit.recipe`` label of the local image ``tag``, or None when there is no such image."""
    client = client or connect(timeout=900)
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    return (image.labels or {}).get("labkit.recipe", "")


def lesson_status(tag: str = IMAGE) -> tuple[bool, str]:
    """Whether the Docker lesson can run here: (True, "") when an engine answers and holds ``tag``;
    else (False, what to do: start an engine, or build the image)."""
    try:
        client = connect(timeout=10)
    except SetupError as exc:
        return False, f"no Docker engine ({exc}); start one with .ci/docker-engine.sh"
    try:
        if image_recipe(tag, client) is None:
            return False, f"the image {tag} is not built; build the image: `labkit image build`"
        return True, ""
    finally:
        client.close()


# -- the root file system -------------------------------------------------------------------------


def _ensure_debootstrap(progress: bool) -> str:
    found = shutil.which("debootstrap") or (os.path.exists("/usr/sbin/debootstrap") and "/usr/sbin/debootstrap")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SetupError(
            needed_by=_BUILDING,
            missing="debootstrap",
            reason="not installed (labkit installs it only as root, with apt-get)",
            remedy="Install it: `sudo apt-get install debootstrap`",
        )
    _say(progress, "installing debootstrap with apt-get ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "debootstrap"]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SetupError(
                needed_by=_BUILDING,
                missing="debootstrap",
                reason="apt-get failed",
                detail=f"`{' '.join(argv)}`\n{proc.stderr.strip()[-1500:]}",
                remedy="Install debootstrap yourself (`sudo apt-get install debootstrap`)",
            )
    return shutil.which("debootstrap") or "/usr/sbin/debootstrap"


def _trim(rootfs: Path) -> None:
    for rel in _TRIM:
        target = rootfs / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    doc = rootfs / "usr/share/doc"
    if doc.is_dir():  # keep each package's copyright file, drop the rest of its documentation
        for path in sorted(doc.rglob("*"), reverse=True):
            if path.is_file() or path.is_symlink():
                if path.name != "copyright":
                    path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    for name in _DROP + ("etc/hostname", "etc/resolv.conf"):  # Docker provides the last two at run time
        (rootfs / name).unlink(missing_ok=True)


def base_rootfs(progress: bool = True, force: bool = False) -> Path:
    """The trimmed Debian root file system (debootstrap'ed once, then cached)."""
    work = _work_dir()
    rootfs = work / f"rootfs-{_base_hash()[:12]}"
    stamp = rootfs / ".labkit-complete"
    if stamp.exists() and not force:
        return rootfs
    if os.geteuid() != 0:
        raise SetupError(
            needed_by=_BUILDING,
            missing="root",
            reason="it runs debootstrap, which needs root",
            remedy="Run it as root (e.g. `sudo .venv/bin/labkit image build`)",
        )
    debootstrap = _ensure_debootstrap(progress)
    partial = rootfs.with_name(rootfs.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    debs = work / "debs"  # downloaded packages, so a forced rebuild needs no network
    debs.mkdir(parents=True, exist_ok=True)
    argv = [
        debootstrap,
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        f"--cache-dir={debs}",
        SUITE,
        str(partial),
        MIRROR,
    ]
    _say(progress, f"debootstrap {SUITE} with {', '.join(PACKAGES)} (about a minute) ...")
    t0 = time.perf_counter()
    log = work / "debootstrap.log"
    with open(log, "wb") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        inner = partial / "debootstrap" / "debootstrap.log"
        if inner.exists():
            tail += "\n--- debootstrap/debootstrap.log ---\n" + "\n".join(
                inner.read_text(errors="replace").splitlines()[-25:]
            )
        raise SetupError(
            needed_by=_BUILDING,
            missing=f"a Debian {SUITE} root file system",
            reason="debootstrap failed",
            detail=f"exit {proc.returncode}\n{tail}",
            remedy=f"Check that {MIRROR} is reachable; if it is not, set LABKIT_DEBIAN_MIRROR to another mirror",
        )
    _say(progress, f"debootstrap done in {time.perf_counter() - t0:.0f} s; trimming")
    _trim(partial)
    shutil.rmtree(rootfs, ignore_errors=True)
    partial.rename(rootfs)
    stamp.write_text(_base_hash())
    for old in work.glob("rootfs-*"):  # root file systems of earlier recipes (about 450 MB each)
        if old != rootfs:
            shutil.rmtree(old, ignore_errors=True)
    return rootfs


def _install_triton(rootfs: Path, dist: triton_dist.TritonDist) -> None:
    target_root = rootfs / TRITON_ROOT.lstrip("/")
    shutil.rmtree(target_root, ignore_errors=True)
    for target, source in _triton_files(dist).items():
        dst = rootfs / target
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dst)
    for exe in ("bin/tritonserver", "backends/python/triton_python_backend_stub"):
        (target_root / exe).chmod(0o755)
    # The C++ runtime programs the image's own loader can find too (e.g. for `ldd` in a shell).
    (rootfs / "etc/ld.so.conf.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/ld.so.conf.d/tritonserver.conf").write_text(f"{TRITON_ROOT}/lib\n")


def _tar_stream(rootfs: Path) -> Iterator[bytes]:
    proc = subprocess.Popen(
        ["tar", "-C", str(rootfs), "--numeric-owner", "--exclude=./.labkit-complete", "-cf", "-", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None  # both are pipes
    try:
        yield from iter(lambda: stdout.read(1 << 20), b"")
    finally:
        stdout.close()
        if proc.wait() != 0:
            raise SetupError(
                needed_by=_BUILDING,
                missing=f"a tar of {rootfs}",
                reason="tar failed",
                detail=stderr.read().decode(errors="replace")[-800:],
                remedy=f"Check the free disk space under {rootfs.parent}, then run `labkit image build --force`",
            )


def _changes(recipe: str, dist: triton_dist.TritonDist) -> list[str]:
    labels = {
        "labkit.recipe": recipe,
        "labkit.triton": triton_dist.SERVER_VERSION,
        "labkit.release": "23.12",
        "labkit.source": f"{triton_dist.WHEEL} + debian {SUITE}",
        "org.opencontainers.image.title": "labkit Triton 23.12 CPU",
        "org.opencontainers.image.description": "Triton Inference Server 2.41.0 (CPU only) with Python 3.11, numpy<2 and g++",
    }
    changes = [f"ENV {key}={value}" for key, value in ENV.items()]
    changes.append("LABEL " + " ".join(f"{k}={json.dumps(v)}" for k, v in labels.items()))
    changes += [f"WORKDIR {TRITON_ROOT}", 'CMD ["tritonserver", "--help"]', "EXPOSE 8000 8001 8002"]
    return changes


def build_image(force: bool = False, progress: bool = True, *, tag: str = IMAGE) -> ImageBuild:
    """Build ``labkit/tritonserver:23.12-cpu`` with no image registry (see the module's docstring).

    An image whose ``labkit.recipe`` label matches the present inputs is reused unless ``force``;
    ``force`` also re-runs debootstrap (from its package cache).
    """
    t0 = time.perf_counter()
    client = connect(timeout=900)
    dist = triton_dist.locate()
    recipe = recipe_hash(dist)
    if not force and image_recipe(tag, client) == recipe:
        image = client.images.get(tag)
        return ImageBuild(tag, image.id, recipe, image.attrs["Size"] / 1e6, time.perf_counter() - t0, True)
    # Two processes building at once (two notebooks, parallel test workers) share the cached root file
    # system: the second waits, then finds the first one's image.
    _work_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(_work_dir() / ".build.lock"):
        if not force and image_recipe(tag, client) == recipe:
            image = client.images.get(tag)
            return ImageBuild(tag, image.id, recipe, image.attrs["Size"] / 1e6, time.perf_counter() - t0, True)
        return _build(client, dist, recipe, tag, force, progress, t0)


def _build(
    client: docker.client.DockerClient,
    dist: triton_dist.TritonDist,
    recipe: str,
    tag: str,
    force: bool,
    progress: bool,
    t0: float,
) -> ImageBuild:
    rootfs = base_rootfs(progress, force=force)
    _say(progress, f"adding Triton {triton_dist.SERVER_VERSION} from {triton_dist.WHEEL}")
    _install_triton(rootfs, dist)
    repository, _, version = tag.rpartition(":")
    if not repository or "/" in version:
        repository, version = tag, "latest"
    _say(progress, f"docker import as {tag} ...")
    old = None
    try:
        old = client.images.get(tag).id
    except docker.errors.ImageNotFound:  # no previous image
        pass
    try:
        result = client.api.import_image(
            src=_tar_stream(rootfs),
            repository=repository,
            tag=version,
            changes=_changes(recipe, dist),
            stream_src=True,
        )
    except docker.errors.APIError as exc:
        raise engine_error(exc, f"import {tag}", "Check its free disk space (`docker system df`)") from None
    image = client.images.get(tag)
    if image.labels.get("labkit.recipe") != recipe:
        raise SetupError(
            needed_by=_BUILDING,
            missing=f"{tag} of recipe {recipe}",
            reason="docker import gave an image of another recipe",
            detail=f"its recipe: {image.labels.get('labkit.recipe')!r}\n{str(result)[-500:]}",
            remedy="Run `labkit image build --force` again; if it repeats, `docker rmi` the tag first",
        )
    if old and old != image.id:
        try:  # the previous build is now untagged: drop it unless a container still uses it
            client.images.remove(old, noprune=False)
        except docker.errors.APIError:
            pass
    seconds = time.perf_counter() - t0
    built = ImageBuild(tag, image.id, recipe, image.attrs["Size"] / 1e6, seconds, False)
    _say(progress, str(built))
    return built


def _add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = sub.add_parser("build", help=f"build {IMAGE} (reused when nothing changed)")
    b.add_argument("--force", action="store_true", help="rebuild even if the recipe is unchanged")
    b.add_argument("--tag", default=IMAGE)
    sub.add_parser("status", help="say whether the image exists and is current")


def parser() -> argparse.ArgumentParser:
    """`labkit image`'s command line (the site's CLI reference is generated from it)."""
    root = argparse.ArgumentParser(prog="labkit image", description="The offline CPU Triton 23.12 image.")
    _add_commands(root.add_subparsers(dest="image_command"))
    return root


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit image` and its subcommands to labkit's parser."""
    image = sub.add_parser(
        "image",
        help="the offline CPU Triton image: `labkit image build [--force]` or `status`",
        description="The offline CPU Triton 23.12 image.",
    )
    _add_commands(image.add_subparsers(dest="image_command"))
    image.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:  # labkit image [build [--force]] | status
    """Carry out a parsed `labkit image` command line."""
    if args.image_command == "status":
        label = image_recipe()
        state = "missing" if label is None else ("current" if label == recipe_hash() else "outdated")
        print(f"{IMAGE}: {state}")
        return 0 if state == "current" else 1
    print(build_image(force=getattr(args, "force", False), tag=getattr(args, "tag", IMAGE)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
