"""Official mode: a backend written against Triton's own headers (``triton/backend/backend_common.h``,
``triton/common/...``) builds unchanged, as Triton's CMake would build it: with the r23.12 include
folders (core, backend, common and RapidJSON, which common's ``triton_json.h`` uses), default
visibility, and Triton's backend utilities (backend/src and common/src), compiled once per toolchain
and flags into a static archive in the build cache (labkit.native.helpers.compiled).
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from ..plumbing.archives import extract
from ..plumbing.downloads import cache_dir, fill_once, pip_download
from . import triton_sources
from .helpers import compiled
from .toolchain import Toolchain

#: A source in official mode includes a header of Triton's backend or common repository.
_OFFICIAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]triton/(backend|common)/', re.MULTILINE)
#: The utilities official backends link (Triton's triton-backend-utils and triton-common-* libraries,
#: CPU only: device_memory_tracker and the CUDA kernel need CUDA).
UTILITIES = {
    "backend": [
        "backend_common",
        "backend_input_collector",
        "backend_memory",
        "backend_model",
        "backend_model_instance",
        "backend_output_responder",
    ],
    "common": ["async_work_queue", "error", "logging", "thread_pool"],
}
ARCHIVE = "libtriton_backend_utils.a"
# RapidJSON from PyPI's python-rapidjson sdist (it bundles headers newer than Debian 12's 1.1.0, which g++ 12
# warns about; no root needed, unlike apt): fetched once into the cache, by `labkit setup` on a fresh machine.
RAPIDJSON = "python-rapidjson==1.25"


def uses_official_headers(text: str) -> bool:
    """Whether a backend's source includes Triton's own backend or common headers."""
    return bool(_OFFICIAL_INCLUDE.search(text))


def flags_for(flags: list[str]) -> list[str]:
    """A build's flags for official mode: default visibility (the sources do not mark what they export),
    and statistics on, as Triton's backend CMake defines for every backend linking its utilities."""
    return [f for f in flags if not f.startswith("-fvisibility=")] + ["-fvisibility=default", "-DTRITON_ENABLE_STATS=1"]


def rapidjson_include() -> Path:
    """RapidJSON's include folder (holding ``rapidjson/``), unpacked from the python-rapidjson sdist."""
    sdist = pip_download(
        RAPIDJSON,
        "python_rapidjson-*.tar.gz",
        "240 kB",
        "RapidJSON's headers come from PyPI's python-rapidjson sdist; official-mode builds need them.",
        options=("--no-binary=:all:",),
    )
    target = cache_dir() / f"rapidjson-{sdist.name.removesuffix('.tar.gz')}"

    def unpack(partial: Path) -> None:
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/rapidjson/include/rapidjson/" in m.name]
            for member in members:
                member.name = member.name.split("/rapidjson/include/", 1)[1]
            extract(tar, partial, members=members)

    return fill_once(target, unpack)


def include_folders() -> list[Path]:
    """The folders an official-mode source compiles against, in search order."""
    return [*triton_sources.include_dirs(), rapidjson_include()]


def utilities(toolchain: Toolchain, flags: list[str], extra_includes: list[str]) -> Path:
    """Triton's backend utilities as one static archive, built on first use for these flags (never
    with -Werror: RapidJSON and the utilities warn under g++ 12, and their warnings are not the cell's)."""
    sources = [
        triton_sources.source(repo) / "src" / f"{name}.cc" for repo, names in UTILITIES.items() for name in names
    ]
    quiet = [f for f in flags if not f.startswith("-W")] + ["-w"]
    return compiled(
        toolchain,
        "triton-utils",
        sources,
        quiet,
        include_folders(),
        extra_includes,
        what="Triton's backend utilities",
        owner="triton-utils",
        archive=ARCHIVE,
    )[0]
