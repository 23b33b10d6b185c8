"""Where things are inside labkit's Triton container, chosen so that paths in Triton's log agree
with the host.

Layout inside the container (chosen so that paths in Triton's log agree with the host):

* the model repository is bind-mounted at the **same path** as on the host;
* the server's backend folder (``<workdir>/backends``, where ``python_backend()`` writes) is
  bind-mounted at the same path and is Triton's ``--backend-directory``. Each of the image's own
  backends (``/opt/tritonserver/backends/*``: in NGC's image ``onnxruntime``, ...) is symbolically
  linked into it (unless the folder has one of that name), so user backends come from the host. Its
  ``python/`` holds labkit's stand-ins for the stub and its utilities (labkit.server.stubs) with the
  image's Python backend linked in beside them (the stub and utilities under ``python/stub/``), so the
  stub is the image's (it matches the image's Python);
* py-spy (a static binary) is mounted read-only at ``/labkit/tools/py-spy``, so the live stack of a
  stuck model.py is read inside the container; eu-stack (for C++ backends) comes from the image;
* C++ builds happen inside the container (``toolchain()``), in a cache folder mounted at the same path.

A host path under a system folder of the image (``/usr``, ``/opt/tritonserver``, ...) is mounted
under ``/labkit/`` instead. The engine must see the host's file system (a local engine, or labkit
running in a container whose work folders are mounted at the same paths on the engine's host).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docker.types import Mount

from ... import stub_side
from ...docker.compiler import BUILDS
from ...docker.mounts import container_path
from ...errors import SetupError
from ...stuck.debuggers import PY_SPY as PY_SPY_NAME, host_tool
from .. import stubs
from ..runtime import Workspace

IMAGE_BACKENDS = "/opt/tritonserver/backends"  # where NGC's image (and labkit's) keep the Python backend
PY_SPY = "/labkit/tools/py-spy"

# A shell step run before tritonserver (which it becomes, by exec, staying PID 1): links each of the
# image's own backends into the mounted backend folder, unless the user has one of that name.
LINK_IMAGE_BACKENDS = """
src="$1"; dst="$2"; shift 2
for b in "$src"/*; do
  n="${b##*/}"
  [ -d "$b" ] && [ ! -e "$dst/$n" ] && [ ! -L "$dst/$n" ] && ln -s "$b" "$dst/$n"
done
for f in "$src"/python/*; do
  n="${f##*/}"
  case "$n" in
    triton_python_backend_stub|triton_python_backend_utils.py) ln -sfn "$f" "$dst/python/stub/$n" ;;
    *) [ -e "$dst/python/$n" ] || ln -sfn "$f" "$dst/python/$n" ;;
  esac
done
exec "$@"
"""


class ContainerLayout:
    """The folders of one server (``workspace``) and the C++ build cache as the container sees them."""

    def __init__(self, workspace: Workspace, build_root: Path) -> None:
        self.workspace = workspace
        self.build_root = build_root

    @property
    def container_repository(self) -> str:
        return container_path(self.workspace.repository.root, "/labkit/models")

    @property
    def container_backends(self) -> str:
        return container_path(self.workspace.backend_dir, "/labkit/backends")

    def trace_folder(self) -> tuple[Path, str]:
        folder = self.workspace.traces
        return folder, container_path(folder, "/labkit/traces")

    def shared_folders(self) -> list[tuple[Path, str]]:
        """The host folders Triton reads and writes, each with its path in the container."""
        return [
            (self.workspace.repository.root, self.container_repository),
            (self.workspace.backend_dir, self.container_backends),
            (self.build_root, container_path(self.build_root, BUILDS)),
            self.trace_folder(),
        ]

    def host_path(self, path: str) -> str:
        for host, inside in self.shared_folders():
            if path == inside or path.startswith(inside + "/"):
                return str(host) + path[len(inside) :]
        return path

    def mounts(self, volumes: dict[Path, str]) -> list[Mount]:
        wanted = [(host, inside, False) for host, inside in self.shared_folders()]
        py_spy = host_tool(PY_SPY_NAME)
        if py_spy is not None:
            wanted.append((Path(py_spy).resolve(), PY_SPY, True))
        for host, target in volumes.items():
            target, _, mode = target.partition(":")
            if not target.startswith("/"):
                raise SetupError(
                    needed_by=f"Mounting {host} into the container",
                    missing=f"an absolute target path (not {target!r})",
                    reason="the mount target is relative",
                    remedy="give the mount target as an absolute path in the container",
                )
            wanted.append((host.expanduser().resolve(), target, mode == "ro"))
        mounts = []
        for host, target, read_only in wanted:
            if not host.exists():
                raise SetupError(
                    needed_by="Mounting into the container",
                    missing=str(host),
                    reason="mount source does not exist",
                    remedy="Create it (or fix the path) first; labkit does not let Docker create it as an empty folder",
                )
            mounts.append(Mount(target=target, source=str(host), type="bind", read_only=read_only))
        return mounts

    def prepare_backends(self) -> None:
        """backends/python: labkit's stand-ins; the image's Python backend is linked in at start."""
        self.workspace.backend_dir.mkdir(parents=True, exist_ok=True)
        self.build_root.mkdir(parents=True, exist_ok=True)
        python = self.workspace.backend_dir / "python"
        if python.is_symlink():  # the layout of older labkit versions: a link to the image's folder
            python.unlink()
        if python.is_dir():  # what an earlier run (embedded, or another image) put there is replaced
            known = stub_side.OWN_NAMES | {"libtriton_python.so", "__pycache__"}
            if {p.name for p in python.iterdir()} - known:
                raise SetupError(
                    needed_by="The container's Python backend folder",
                    missing=f"{python} without other files",
                    reason="it holds files other than Triton's Python backend and labkit's",
                    remedy="move them, the container links the image's Python backend there",
                )
            for entry in python.iterdir():
                if entry.name not in stub_side.OWN_NAMES or entry.name == stub_side.TRITON_DIR:
                    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        stubs.install(python)

    def command(self, triton_argv: list[str]) -> list[str]:
        """The container's command: link the image's backends in, then become tritonserver."""
        return ["sh", "-c", LINK_IMAGE_BACKENDS, "labkit", IMAGE_BACKENDS, self.container_backends, *triton_argv]
