"""perf_analyzer 23.12 (2.41.0), unpacked once into labkit's cache with the two libraries it needs.

The PyPI wheel ``tritonclient==2.41.0`` carries the real binary; only that file is taken from it, so
the lab's own tritonclient stays as it is. On Debian 12 it also needs ``libb64.so.0d``
(Debian package libb64-0d: fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x``, which
needs no root) and ``libcudart.so.12`` (PyPI nvidia-cuda-runtime-cu12; it loads without a GPU).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import SetupError
from ..plumbing.downloads import cache_dir, fill_once, make_executable, pip_download, say, system_has

VERSION = "2.41.0"  # release 23.12
CLIENT_WHEEL = f"tritonclient=={VERSION}"
CUDART_WHEEL = "nvidia-cuda-runtime-cu12==12.3.101"  # the CUDA 12.3 runtime perf_analyzer 23.12 was built with
LIBB64 = "libb64.so.0d"
LIBB64_PACKAGE = "libb64-0d"
_BINARY_IN_WHEEL = f"tritonclient-{VERSION}.data/data/bin/perf_analyzer"
_CUDART_IN_WHEEL = "nvidia/cuda_runtime/lib/libcudart.so.12"


@dataclass(frozen=True)
class PerfAnalyzer:
    """The unpacked perf_analyzer: ``bin/perf_analyzer`` and ``lib/`` with its libraries."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "perf_analyzer"

    @property
    def lib_dir(self) -> Path:
        return self.root / "lib"

    def env(self) -> dict[str, str]:
        """The environment to run it in: its libraries first on the loader's path."""
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(self.lib_dir), env.get("LD_LIBRARY_PATH")]))
        return env


def _extract(wheel: Path, member: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)


def _libb64(lib_dir: Path) -> None:
    """Put libb64.so.0d into ``lib_dir`` from Debian's package, unless the system has it already."""
    if system_has(LIBB64):
        return
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        raise SetupError(
            needed_by="perf_analyzer",
            missing=f"{LIBB64} (Debian/Ubuntu package {LIBB64_PACKAGE})",
            reason="this machine has no apt-get to fetch it",
            remedy="Install that library with your system's package manager",
        )
    with tempfile.TemporaryDirectory(prefix="labkit-libb64-") as tmp:
        say(f"fetching {LIBB64} (Debian package {LIBB64_PACKAGE}, 10 kB) ...")
        fetch = subprocess.run(["apt-get", "download", LIBB64_PACKAGE], cwd=tmp, capture_output=True, text=True)
        if fetch.returncode != 0 and os.geteuid() == 0:  # package lists may be missing on a fresh machine
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
            fetch = subprocess.run(["apt-get", "download", LIBB64_PACKAGE], cwd=tmp, capture_output=True, text=True)
        debs = list(Path(tmp).glob(f"{LIBB64_PACKAGE}_*.deb"))
        if fetch.returncode != 0 or not debs:
            raise SetupError(
                needed_by="perf_analyzer",
                missing=LIBB64,
                reason=f"`apt-get download {LIBB64_PACKAGE}` failed",
                detail=fetch.stderr.strip()[-600:],
                remedy=f"Run `sudo apt-get update && sudo apt-get install {LIBB64_PACKAGE}`, then try again",
            )
        unpacked = Path(tmp) / "root"
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], check=True, capture_output=True)
        found = sorted(unpacked.rglob(LIBB64))
        if not found:
            raise SetupError(
                needed_by="perf_analyzer",
                missing=LIBB64,
                reason=f"the package {debs[0].name} holds none",
                remedy=f"install {LIBB64_PACKAGE} with apt-get",
            )
        shutil.copy2(found[0], lib_dir / LIBB64)


def _check(pa: PerfAnalyzer) -> None:
    """Run ``perf_analyzer --version``: the loader names any library still missing."""
    proc = subprocess.run([str(pa.binary), "--version"], env=pa.env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SetupError(
            missing=f"perf_analyzer ({pa.binary})",
            reason="does not start",
            detail=(proc.stderr or proc.stdout).strip()[-800:],
            remedy=f"Remove {pa.root} to set it up again, or install the missing library",
        )


def _target() -> Path:
    return cache_dir() / f"perf_analyzer-{VERSION}"


def installed() -> PerfAnalyzer | None:
    """perf_analyzer if it is set up in the cache, checked to start (SetupError if it does not); None if
    it was never set up. Downloads nothing."""
    target = _target()
    if not target.exists():
        return None
    pa = PerfAnalyzer(target)
    _check(pa)
    return pa


def locate(check: bool = False) -> PerfAnalyzer:
    """perf_analyzer 23.12, set up in the cache on first use (about 16 MB of downloads, with progress)."""
    target = _target()
    if target.exists():
        pa = PerfAnalyzer(target)
        if check:
            _check(pa)
        return pa
    say(f"setting up perf_analyzer {VERSION} (Triton 23.12's) in {target}, once ...")
    client = pip_download(
        CLIENT_WHEEL,
        f"tritonclient-{VERSION}-*.whl",
        "12 MB",
        f"perf_analyzer {VERSION} ships in that wheel; check the network, then try again.",
    )
    cudart = pip_download(
        CUDART_WHEEL,
        "nvidia_cuda_runtime_cu12-12.3.101-*.whl",
        "1 MB",
        "perf_analyzer needs libcudart.so.12 (no GPU needed); check the network, then try again.",
    )

    def fill(partial: Path) -> None:
        pa = PerfAnalyzer(partial)
        _extract(client, _BINARY_IN_WHEEL, pa.binary)
        make_executable(pa.binary)
        _extract(cudart, _CUDART_IN_WHEEL, pa.lib_dir / "libcudart.so.12")
        _libb64(pa.lib_dir)
        _check(pa)

    pa = PerfAnalyzer(fill_once(target, fill))
    say(f"perf_analyzer {VERSION} is ready.")
    return pa
