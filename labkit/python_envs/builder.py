"""Build an execution environment for Python models (``EXECUTION_ENV_PATH``): a venv of the Python that
the target runtime's stub embeds, with the packages asked for and ``numpy<2`` (23.12's stub returns empty
outputs with numpy 2), written as a folder or as a packed ``.tar.gz``.

The environment is built once per set of inputs in labkit's cache (``python-envs/<key>/``): pip installs
into a venv there, venv-pack packs it (relocatable: its ``bin/activate`` finds its own folder, which a
plain venv's does not; python_backend unpacks a tarball into a temporary folder of its own), and each
call unpacks (folder) or copies (``.tar.gz``) the cached archive to where it was asked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ..errors import PythonEnvError
from ..plumbing.archives import extract
from ..plumbing.downloads import cache_dir, fill_once, system_has
from ..plumbing.process_groups import die_with_parent
from .stub_pythons import StubRuntime, Version, parse_version, runtime_stubs, version_text

NUMPY_PIN = "numpy<2"  # 23.12's stub (pybind11 over numpy 1's ABI) answers with empty outputs under numpy 2
_FORMAT = 1  # bump when what a cached environment holds changes
_PARAMETER = 'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{value}" }} }}'


@dataclass(frozen=True)
class PythonEnv:
    """An environment made by ``python_env``: where it is and what it holds."""

    path: Path  # the folder, or the .tar.gz
    python: str  # "3.11"
    numpy: str  # the numpy version in it
    requirements: tuple[str, ...]  # what pip was asked for (numpy<2 included)
    packed: bool
    cached: bool  # built before: only unpacked or copied this time
    seconds: float

    def parameter(self, model_dir: str | Path | None = None) -> str:
        """The config.pbtxt line that gives a model this environment; under ``model_dir`` it is written
        with ``$$TRITON_MODEL_DIRECTORY`` (the repository may then move, or be mounted elsewhere)."""
        value = str(self.path.resolve())
        if model_dir is not None:
            inside = self.path.resolve().relative_to(Path(model_dir).resolve())
            value = f"$$TRITON_MODEL_DIRECTORY/{inside.as_posix()}"
        return _PARAMETER.format(value=value)


def _interpreter(version: Version) -> str:
    """A Python ``version`` on this machine (this one first), PythonEnvError when there is none."""
    if sys.version_info[:2] == version:
        return getattr(sys, "_base_executable", sys.executable)
    name = f"python{version_text(version)}"
    home = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [
        shutil.which(name),
        *sorted(str(p) for p in home.glob(f"versions/{version_text(version)}.*/bin/{name}")),
        *sorted(
            str(p)
            for p in (Path.home() / ".local/share/uv/python").glob(f"cpython-{version_text(version)}.*/bin/{name}")
        ),
        f"/usr/bin/{name}",
        f"/usr/local/bin/{name}",
    ]
    for candidate in dict.fromkeys(c for c in candidates if c):
        try:
            said = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if said == version_text(version):
            return candidate
    raise PythonEnvError(
        problem="interpreter",
        wanted=version_text(version),
        detail=f"looked for {name} on PATH, under pyenv and uv, and in /usr/bin",
        remedy=(
            f"Install one (`uv python install {version_text(version)}`, pyenv, or your system's package), or build "
            f"for the Python this lab runs ({version_text(sys.version_info[:2])})"
        ),
    )


def _run_pip(venv: Path, requirements: list[str], progress: Callable[[str], None]) -> None:
    argv = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--progress-bar", "off"]
    parent = os.getpid()
    proc = subprocess.Popen(
        [*argv, *requirements],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
        # A builder killed outright (SIGKILL) must not leave pip writing into the folder that the next build
        # sweeps away as abandoned (plumbing.partials): pip dies with it.
        preexec_fn=lambda: die_with_parent(parent),
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        line = line.rstrip()
        if line and not line.startswith("WARNING: Location"):  # pip's notes on unused local indexes
            lines.append(line)
            progress(f"  pip: {line}")
    if proc.wait() != 0:
        raise PythonEnvError(
            problem="pip",
            packages=requirements,
            output="\n".join(lines[-40:]),
            remedy=(
                "Check the names and versions pip could not find or build (it says which); a first build needs the "
                "package index, or a local one that pip is configured for (PIP_INDEX_URL, PIP_FIND_LINKS)"
            ),
        )


def _retarget(venv: Path, version: Version, prefix: str) -> None:
    """Point the venv's interpreter at the runtime's own (e.g. /usr/bin/python3.11 in an image)."""
    exe = f"{prefix}/bin/python{version_text(version)}"
    link = venv / "bin" / f"python{version_text(version)}"
    link.unlink()
    link.symlink_to(exe)
    cfg = venv / "pyvenv.cfg"
    lines = []
    for line in cfg.read_text().splitlines():
        key = line.split("=", 1)[0].strip()
        lines.append({"home": f"home = {prefix}/bin", "executable": f"executable = {exe}"}.get(key, line))
    cfg.write_text("\n".join(lines) + "\n")


def _link_libpython(venv: Path, interpreter: str, version: Version) -> None:
    """The stub links libpythonX.Y and python_backend puts ``<env>/lib`` first on its library path: a
    Python whose shared library the system's loader does not know (pyenv's, uv's) gets a link there."""
    libdir = subprocess.run(
        [interpreter, "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR') or '')"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    name = f"libpython{version_text(version)}.so.1.0"
    if libdir and (Path(libdir) / name).exists() and not system_has(name):
        (venv / "lib" / name).symlink_to(Path(libdir) / name)


def _build(
    folder: Path, interpreter: str, version: Version, stubs: StubRuntime, pip_args: list[str], progress: Callable
) -> None:
    import venv_pack  # imported here: only building needs it

    venv = folder / "venv"
    progress(f"creating a Python {version_text(version)} venv ({interpreter})")
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    progress(f"installing {' '.join(pip_args)} (the long step; later builds of the same list reuse this one)")
    _run_pip(venv, pip_args, progress)
    if stubs.python_prefix:
        _retarget(venv, version, stubs.python_prefix)
    else:
        _link_libpython(venv, interpreter, version)
    progress("packing it (venv-pack: relocatable)")
    venv_pack.pack(prefix=str(venv), output=str(folder / "env.tar"), format="tar", verbose=False)
    shutil.rmtree(venv)


def cached_build(
    version: Version, stubs: StubRuntime, pip_args: list[str], requirements_text: str, say: Callable[[str], None]
) -> tuple[Path, bool]:
    """The cache's folder holding ``env.tar``, a venv of Python ``version`` with ``pip_args`` installed (built
    once per interpreter, arguments and requirements text; one build at a time across processes), and whether
    it was there before."""
    interpreter = _interpreter(version)
    key = hashlib.sha256(
        json.dumps(
            [_FORMAT, os.path.realpath(interpreter), version, pip_args[:-1], requirements_text, stubs.python_prefix]
        ).encode()
    ).hexdigest()[:16]
    folder = cache_dir() / "python-envs" / key
    cached = folder.exists()
    if not cached:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(folder.parent / f".{key}.lock"):  # two servers asking at once build it once
            fill_once(folder, lambda partial: _build(partial, interpreter, version, stubs, pip_args, say))
    return folder, cached


def unpack(archive: Path, into: Path) -> None:
    """A cached build's ``env.tar`` unpacked into the folder ``into`` (made if missing). tarfile's "tar"
    filter: no member lands outside ``into``, while a link to an absolute path stays (a venv built for an
    image links the image's own interpreter, /usr/bin/python3.X)."""
    with tarfile.open(archive) as tar:
        extract(tar, into, "tar")


def _numpy_version(archive: Path) -> str:
    from .env_contents import read_env

    return read_env(archive).numpy


def read_requirements(path: str | Path, model: str = "") -> str:
    """A requirements file's text; PythonEnvError (``problem="requirements"``) when it cannot be read."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise PythonEnvError(
            problem="requirements",
            path=str(path),
            model=model,
            detail=exc.strerror or str(exc),
            remedy="Give the path of a readable requirements file: one pip requirement a line",
        ) from None


def _requirements(packages: Iterable[str], requirements: str | Path | None) -> tuple[list[str], str]:
    """pip's arguments and the requirements file's text (part of the cache key)."""
    args = [str(p) for p in packages]
    text = ""
    if requirements is not None:
        text = read_requirements(requirements)
        args += ["-r", str(Path(requirements).resolve())]
    return [*args, NUMPY_PIN], text


def python_env(
    out: str | Path,
    packages: Sequence[str] = (),
    *,
    requirements: str | Path | None = None,
    pack: bool = False,
    python: str | None = None,
    runtime: str = "embedded",
    image: str | None = None,
    replace: bool = False,
    progress: Callable[[str], None] | None = print,
) -> PythonEnv:
    """An execution environment for Python models at ``out`` (a folder), or with ``pack=True`` at
    ``out.tar.gz`` beside it: a venv of the Python the stub of ``runtime`` embeds ("embedded", or
    "docker" with ``image``; ``python="3.X"`` for another stub the runtime holds), with ``packages``
    (pip requirement specifiers), the lines of ``requirements`` and ``numpy<2``. Give it to a model with
    ``env.parameter(model_dir)`` in its config.pbtxt. Nothing that exists is replaced unless ``replace``.
    ``progress`` receives a line per step (pip's own lines included); None keeps it quiet."""
    started = time.monotonic()
    say = progress or (lambda _line: None)
    stubs = runtime_stubs(runtime, image, python)
    version = parse_version(python) if python else stubs.serves
    if version not in stubs.holds:
        raise PythonEnvError(
            problem="python",
            wanted=version_text(version),
            available=[version_text(v) for v in stubs.holds],
            runtime=stubs.where(),
            remedy=(
                "A model given this environment could never load: build for Python "
                f"{' or '.join(map(version_text, stubs.holds))}"
            ),
        )
    out = Path(out).expanduser().absolute()
    target = out if not pack or out.name.endswith(".tar.gz") else out.with_name(f"{out.name}.tar.gz")
    if (target.exists() or target.is_symlink()) and not replace:
        raise PythonEnvError(
            problem="exists",
            path=str(target),
            remedy="Remove it, choose another path, or pass replace=True (--replace)",
        )
    pip_args, requirements_text = _requirements(packages, requirements)
    folder, cached = cached_build(version, stubs, pip_args, requirements_text, say)
    if cached:
        say(f"reusing the environment built before for {' '.join(pip_args)} ({folder})")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        if pack:
            gz = folder / "env.tar.gz"
            if not gz.exists():
                say(f"compressing {target.name}")
                _compress(folder / "env.tar", gz)
            shutil.copyfile(gz, partial)
        else:
            say(f"unpacking into {target}")
            unpack(folder / "env.tar", partial)
        _put_in_place(partial, target)
    finally:
        _remove(partial)
    numpy = _numpy_version(folder / "env.tar")
    seconds = round(time.monotonic() - started, 2)
    env = PythonEnv(target, version_text(version), numpy, tuple(pip_args), pack, cached, seconds)
    say(f"ready: {target} (Python {env.python}, numpy {env.numpy}) in {env.seconds:.1f} s")
    return env


def _compress(tar: Path, gz: Path) -> None:
    import gzip

    partial = gz.with_name(f"{gz.name}.partial-{os.getpid()}")
    with open(tar, "rb") as src, gzip.open(partial, "wb", compresslevel=4) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(partial, gz)


def _put_in_place(partial: Path, target: Path) -> None:
    """Replace ``target`` (if any) by ``partial`` with renames: no half-written environment is ever seen."""
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists() or target.is_symlink():
        target.rename(old)
    partial.rename(target)
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()
