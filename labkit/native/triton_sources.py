"""Triton's own r23.12 sources (backend, common, core's include/), unpacked, for official-mode builds;
``tree`` gives a repository's whole tree (core's CMakeLists.txt too), for CMake projects that fetch it.

Taken from ``$LABKIT_TRITON_SOURCES`` when set: a folder holding the pinned archives
(``backend-r23.12.tar.gz``, ``common-r23.12.tar.gz``, ``core-include-r23.12.tar.gz``, and
``core-r23.12.tar.gz`` for ``tree("core")``) or the unpacked folders (``backend/``, ``common/``,
``core/``); nothing is downloaded then. Otherwise each repository is downloaded once from GitHub at its
pinned commit into ``~/.cache/labkit/triton-sources/`` (GitHub's archive is the whole tree). labkit
commits none of this code: it is read at build time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.request
from pathlib import Path

from ..errors import OptionError, SetupError
from ..plumbing.archives import extract
from ..plumbing.downloads import cache_dir, fill_once, say

ENV = "LABKIT_TRITON_SOURCES"
#: repository -> (archive name in a LABKIT_TRITON_SOURCES folder, commit of its r23.12 branch)
PINNED = {
    "backend": ("backend-r23.12.tar.gz", "33be4466c3319d21daf2de9594cc13ef48aab7d8"),
    "common": ("common-r23.12.tar.gz", "c8ce7c7dba7903d8d17c5d80b0cc9781d1d1626d"),
    "core": ("core-include-r23.12.tar.gz", "e978d80c5138890bc48d798f5187b11be3ac6d23"),
}
#: a file each unpacked folder must hold (how a folder is told from an incomplete one)
MARKER = {
    "backend": "include/triton/backend/backend_common.h",
    "common": "include/triton/common/triton_json.h",
    "core": "include/triton/core/tritonbackend.h",
}
#: core's whole tree (its CMakeLists.txt builds the server stub backends link against): the archive in a
#: LABKIT_TRITON_SOURCES folder, and the file that tells the whole tree from the include-only one.
CORE_TREE = ("core-r23.12.tar.gz", "src/tritonserver_stub.cc")
GITHUB = "https://github.com/triton-inference-server/{repo}/archive/{commit}.tar.gz"


def source(repo: str) -> Path:
    """The unpacked r23.12 folder of ``repo`` ("backend", "common" or "core"); SetupError if missing."""
    if repo not in PINNED:
        raise OptionError(option="repo", value=repo, valid=f"a pinned Triton repository: {', '.join(PINNED)}")
    given = os.environ.get(ENV, "").strip()
    folder = _from_folder(repo, Path(given).expanduser(), PINNED[repo][0], MARKER[repo]) if given else _downloaded(repo)
    if not (folder / MARKER[repo]).is_file():
        raise SetupError(
            needed_by=f"Triton's {repo} repository at r23.12 ({folder})",
            remedy=f"set {ENV} to a folder holding {PINNED[repo][0]} or an unpacked {repo}/",
            missing=str(folder / MARKER[repo]),
            reason="no such file",
        )
    return folder


def tree(repo: str) -> Path:
    """The whole r23.12 tree of ``repo`` (what a CMake project's FetchContent of ``repo-<repo>`` reads):
    for backend and common their ``source``; for core the whole repository, not only its include/."""
    if repo != "core":
        return source(repo)
    given = os.environ.get(ENV, "").strip()
    folder = _from_folder(repo, Path(given).expanduser(), *CORE_TREE) if given else _downloaded(repo)
    if not (folder / CORE_TREE[1]).is_file():
        raise SetupError(
            needed_by=f"Triton's whole core repository at r23.12 ({folder})",
            remedy=f"set {ENV} to a folder holding {CORE_TREE[0]} or an unpacked core/ with its CMakeLists.txt",
            missing=str(folder / CORE_TREE[1]),
            reason="no such file",
        )
    return folder


def _from_folder(repo: str, root: Path, archive_name: str, marker: str) -> Path:
    unpacked, archive = root / repo, root / archive_name
    if (unpacked / marker).is_file():
        return unpacked
    if archive.is_file():
        data = archive.read_bytes()
        key = hashlib.sha256(data).hexdigest()[:16]
        target = cache_dir() / "triton-sources" / f"{repo}-{key}"
        fill_once(target, lambda partial: _unpack(archive, repo, partial))
        return target
    raise SetupError(
        needed_by=f"{ENV}={root}",
        reason="no such file",
        detail=f"it holds neither {archive_name} nor an unpacked {repo}/ folder",
        remedy=f"set {ENV} to a folder laid out like the pinned Triton r23.12 archives, or unset it to download them from GitHub",
        missing=str(archive),
    )


def _unpack(archive: Path, repo: str, partial: Path) -> None:
    """Unpack ``archive`` so that ``partial`` is the repository's own top folder (archives hold one
    folder: ``repo/`` for the pinned ones, ``repo-<commit>/`` for GitHub's)."""
    scratch = partial / ".unpack"
    with tarfile.open(archive) as tar:
        extract(tar, scratch)
    tops = [p for p in scratch.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise SetupError(
            reason=f"it does not hold one top folder ({repo}/); it is not a Triton source archive",
            remedy=f"give the pinned archive {archive.name} as GitHub serves it, or an unpacked {repo}/ folder",
            missing=str(archive),
        )
    for item in tops[0].iterdir():
        item.rename(partial / item.name)
    shutil.rmtree(scratch)


def _downloaded(repo: str) -> Path:
    commit = PINNED[repo][1]
    target = cache_dir() / "triton-sources" / f"{repo}-{commit[:12]}"
    if (target / MARKER[repo]).is_file():
        return target
    url = GITHUB.format(repo=repo, commit=commit)
    archive = cache_dir() / "triton-sources" / f".{repo}-{commit[:12]}.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    say(f"downloading Triton's {repo} sources at r23.12 ({commit[:12]}, once) ...")
    try:
        with urllib.request.urlopen(url, timeout=120) as answer, open(archive, "wb") as out:
            shutil.copyfileobj(answer, out)
        fill_once(target, lambda partial: _unpack(archive, repo, partial))
    except OSError as exc:
        raise SetupError(
            reason="unreachable",
            detail=str(exc),
            remedy=f"Offline, set {ENV} to a folder holding the pinned r23.12 archives ({', '.join(name for name, _ in PINNED.values())}) or their unpacked folders",
            missing=url,
        ) from None
    finally:
        archive.unlink(missing_ok=True)
    return target


def include_dirs() -> list[Path]:
    """The official include folders: core's, backend's and common's ``include/``."""
    return [source(repo) / "include" for repo in ("core", "backend", "common")]
