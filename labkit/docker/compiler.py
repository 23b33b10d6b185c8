"""Compiling C++ backends inside the container Triton runs in, with its own g++, so the library
links the C++ runtime it runs with. The build cache is mounted into the container at the same path."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import BuildError
from ..native.helpers import folder_digest
from ..native.toolchain import COMPILER_ENV, Toolchain
from .mounts import container_path

#: Runs argv in the container (in a working folder as the container sees it): exit code, stdout, stderr.
Exec = Callable[[list[str], str | None, dict[str, str]], tuple[int, str, str]]
#: Where the build cache appears in the container when its host path cannot be used there.
BUILDS = "/labkit/builds"
#: Where NGC's image keeps Triton's C headers.
IMAGE_HEADERS = "/opt/tritonserver/include"
#: The server library backends call into, in NGC's image and in labkit's CPU image.
IMAGE_SERVER_LIBRARIES = "/opt/tritonserver/lib/libtritonserver*.so*"


class ContainerToolchain(Toolchain):
    """The container's compiler; host paths under ``build_root`` are mounted into the container."""

    label = " in the container"

    def __init__(self, exec_run: Exec, build_root: Path, image_id: str, image: str, cxx: str = "g++") -> None:
        self._exec = exec_run
        self.build_root = build_root
        self.image_id = image_id
        self.cxx = cxx
        self._server_library: str | None = None
        code, out, err = exec_run([cxx, "--version"], None, COMPILER_ENV)
        if code != 0:
            raise BuildError(
                problem=f"The image {image} has no C++ compiler ({cxx}: {(err or out).strip()[:200]})",
                command=f"{cxx} --version",
                remedy=(
                    "C++ backends must be compiled where they run: use the offline CPU image (`labkit image build`; "
                    "it has g++) or the lab image (docker/Dockerfile), or install g++ in your image"
                ),
            )
        self._version = out.splitlines()[0] if out else cxx

    @property
    def cache_root(self) -> Path:
        return self.build_root / self.image_id.split(":")[-1][:12]

    def version(self) -> str:
        return self._version

    def cache_key(self) -> bytes:
        return self.image_id.encode()

    def include(self, folder: Path) -> str:
        """Copy a folder (headers, the helper sources) into the mounted build cache, by content; its path in the container."""
        digest = folder_digest(folder)[:16]
        target = self.build_root / "include" / digest
        if not target.exists():
            partial = target.with_name(digest + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(folder, partial)
            partial.rename(target)
        return self.path(target)

    def path(self, host_path: Path) -> str:
        return container_path(host_path, f"{BUILDS}/{host_path.relative_to(self.build_root).as_posix()}")

    def triton_headers(self) -> list[str]:
        return [IMAGE_HEADERS]

    def triton_library(self) -> str | None:
        if self._server_library is None:
            # NGC's image has libtritonserver.so; labkit's CPU image keeps the wheel's hashed name.
            code, out, _ = self._exec(["sh", "-c", f"ls {IMAGE_SERVER_LIBRARIES}"], None, COMPILER_ENV)
            self._server_library = out.split()[0] if code == 0 and out.split() else ""
        return self._server_library or None

    def run(self, argv: list[str], cwd: Path) -> tuple[int, str]:
        argv = [self.cxx if argv[0] == "c++" else argv[0], *argv[1:]]
        code, out, err = self._exec(argv, self.path(cwd), COMPILER_ENV)
        return code, err + out
