"""Which Python each runtime's Python-backend stub embeds: an execution environment must have that Python.

A stub is built against one Python (it links ``libpython3.X.so``). The nvidia-pytriton wheel ships stubs
for Python 3.8 to 3.11, and labkit's embedded server runs the one for its own Python; labkit's CPU image
holds Debian bookworm's 3.11; NVIDIA's ``tritonserver:23.12-py3`` (Ubuntu 22.04) holds 3.10, as the
r23.12 python_backend README says ("Python backend shipped in the NVIDIA GPU Cloud containers uses
Python 3.10").
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..docker import cpu_image, images
from ..errors import PythonEnvError
from ..plumbing import triton_dist

Version = tuple[int, int]

#: image -> (the Python of its stub, the prefix its interpreter lives under)
KNOWN_IMAGES: dict[str, tuple[Version, str]] = {
    cpu_image.IMAGE: (cpu_image.PYTHON_VERSION, "/usr"),
    images.DEFAULT_IMAGE: ((3, 10), "/usr"),
}
RUNTIMES = ("embedded", "docker")


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def parse_version(text: str | Version) -> Version:
    """``"3.10"`` (or ``(3, 10)``) as a version; PythonEnvError for anything else."""
    if isinstance(text, tuple):
        return (int(text[0]), int(text[1]))
    match = re.fullmatch(r"(\d+)\.(\d+)", str(text).strip())
    if not match:
        raise PythonEnvError(problem="version", wanted=str(text), remedy="Give MAJOR.MINOR, e.g. 3.11")
    return (int(match[1]), int(match[2]))


@dataclass(frozen=True)
class StubRuntime:
    """The Python-backend stubs of one runtime."""

    runtime: str  # "embedded" or "docker"
    image: str  # "" for the embedded server
    serves: Version  # the stub labkit's backends/python runs
    holds: tuple[Version, ...]  # every stub the runtime has (one of them can be given to a model or backend)
    python_prefix: str  # where the runtime's Python lives ("": this machine's, for the embedded server)

    def where(self) -> str:
        """Where the stubs are: an image, or the wheel of the embedded server."""
        return f"image {self.image}" if self.image else "the nvidia-pytriton wheel (labkit's embedded server)"

    def describe(self) -> str:
        return f"{self.where()}: stubs for Python {', '.join(map(version_text, self.holds))}"


def runtime_stubs(runtime: str = "embedded", image: str | None = None, python: str | None = None) -> StubRuntime:
    """The stubs ``runtime`` holds ("embedded"; "docker" with ``image``, default labkit's CPU image). For an
    image labkit does not know, ``python="3.X"`` says which Python its stub embeds (under /usr)."""
    if runtime == "embedded":
        own: Version = (sys.version_info[0], sys.version_info[1])
        return StubRuntime("embedded", "", own, triton_dist.STUB_PYTHONS, "")
    if runtime != "docker":
        raise PythonEnvError(problem="runtime", runtime=runtime, remedy=f"Give one of: {', '.join(RUNTIMES)}")
    image = image or cpu_image.IMAGE
    if image in KNOWN_IMAGES:
        version, prefix = KNOWN_IMAGES[image]
    elif python is not None:
        version, prefix = parse_version(python), "/usr"
    else:
        raise PythonEnvError(
            problem="unknown stub",
            runtime=f"image {image}",
            detail=f"it knows {', '.join(KNOWN_IMAGES)}, so it cannot build a model's environment for this one",
            remedy=(
                f"Build one yourself: `labkit python-env MODEL/env --server docker --image {image} --python 3.X "
                "--requirements MODEL/requirements.txt` (3.X: the image's `python3 --version`), name it in the "
                'model\'s config.pbtxt (parameters { key: "EXECUTION_ENV_PATH" ... }), or serve with an image labkit '
                "knows"
            ),
        )
    return StubRuntime("docker", image, version, (version,), prefix)


def stub_python(binary: Path) -> Version | None:
    """The Python a stub binary was built for (the ``libpython3.X`` it links), None if unreadable."""
    try:
        data = binary.read_bytes()
    except OSError:
        return None
    # The stub's dynamic section names its libpython; no ELF reader is in labkit's dependencies for one string.
    match = re.search(rb"libpython(\d+)\.(\d+)", data)
    return (int(match[1]), int(match[2])) if match else None
