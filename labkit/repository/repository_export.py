"""A lab's model repository as NVIDIA's Triton 23.12 image serves it unchanged: every model's
config.pbtxt as written, its latest version folder and the files beside its config, the Python-based
backends the models name, and a README with the one command that starts the image on them.

    exported = export_repository(lab.repository, "handover", backends=lab.workspace.backend_dir)
    # or: labkit export-repository model_repository handover

What stays out, and why, is in ``exported.left_out``: a C++ backend's library built here (build it for the
image from its CMake project: ``labkit export BACKEND DIR``), and older version folders.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RepositoryError
from .repository import ModelRepository

IMAGE = "nvcr.io/nvidia/tritonserver:23.12-py3"
IMAGE_BACKENDS = "/opt/tritonserver/backends"
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "libtriton_*.so")


@dataclass(frozen=True)
class ExportedRepository:
    """What ``export_repository`` wrote under ``folder``: ``models/``, ``backends/`` and ``README.md``."""

    folder: Path
    models: tuple[str, ...]
    backends: tuple[str, ...]  # Python-based backends, under backends/<name>/model.py
    left_out: dict[str, str] = field(default_factory=dict)  # model -> why it is not in models/

    def command(self, image: str = IMAGE, models: str = "$PWD/models", backends: str = "$PWD/backends") -> str:
        """The docker command that serves the export with Triton's own defaults (no labkit option)."""
        mounts = [f'-v "{models}:/models"'] + [
            f'-v "{backends}/{name}:{IMAGE_BACKENDS}/{name}"' for name in self.backends
        ]
        return (
            f"docker run --rm -p 8000:8000 -p 8001:8001 -p 8002:8002 {' '.join(mounts)} {image} "
            "tritonserver --model-repository=/models"
        )


def export_repository(
    repository: ModelRepository | str | Path,
    folder: str | Path,
    *,
    models: Iterable[str] | None = None,
    backends: str | Path | None = None,
) -> ExportedRepository:
    """Copy ``models`` (default: every model) of ``repository`` into ``folder``/models, with the Python-based
    backends they name from ``backends`` (a folder of ``<name>/model.py``, e.g. a lab's backend folder) into
    ``folder``/backends, and write ``folder``/README.md saying how to start NVIDIA's image on them.
    RepositoryError when ``folder`` exists and is not empty, or a model is not in the repository."""
    source = repository if isinstance(repository, ModelRepository) else ModelRepository(repository)
    out = Path(folder)
    if out.exists() and any(out.iterdir()):
        raise RepositoryError(
            subject=str(out),
            problem="is not empty (nothing was written)",
            refused=str(out),
            remedy="export into a new folder",
        )
    chosen = list(models) if models is not None else source.models()
    missing = [name for name in chosen if name not in source.models()]
    if missing:
        raise RepositoryError(
            subject=f"{', '.join(missing)}:",
            problem=f"not in {source.root} (it has {', '.join(source.models()) or 'no model'})",
            refused=missing,
            remedy="name models of that repository",
        )
    shared = Path(backends) if backends is not None else None
    written, python_based, left_out = [], [], {}
    for name in chosen:
        config = source.read_config(name)
        versions = source.versions(name)
        folder_of = source.model_dir(name)
        own_backend = shared / config.backend / "model.py" if shared is not None and config.backend else None
        if config.backend not in ("", "python") and not (own_backend and own_backend.exists()):
            left_out[name] = (
                f"backend {config.backend!r} is a C++ library built on this machine: `labkit export "
                f"{config.backend} DIR` writes its CMake project, whose Dockerfile builds it into {IMAGE}"
            )
            continue
        target = out / "models" / name
        target.mkdir(parents=True)
        for item in folder_of.iterdir():
            if item.is_dir() and item.name.isdigit():
                if versions and int(item.name) == versions[-1]:
                    shutil.copytree(item, target / item.name, ignore=_SKIP)
            elif item.is_dir():
                shutil.copytree(item, target / item.name, ignore=_SKIP)
            else:
                shutil.copy2(item, target / item.name)
        written.append(name)
        if own_backend and own_backend.exists() and config.backend not in python_based:
            (out / "backends" / config.backend).mkdir(parents=True)
            shutil.copy2(own_backend, out / "backends" / config.backend / "model.py")
            python_based.append(config.backend)
    exported = ExportedRepository(out, tuple(written), tuple(python_based), left_out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(_readme(exported))
    return exported


def _readme(exported: ExportedRepository) -> str:
    lines = [
        "# Models exported from a labkit lab, for NVIDIA's Triton 23.12 image",
        "",
        "Each model's `config.pbtxt` is as it was written in the lab, with its latest version folder and the",
        "files beside its config. Copy this folder to a machine with Docker (and NGC access), then start",
        f"`{IMAGE}` on it with Triton's own defaults:",
        "",
        "```sh",
        exported.command(),
        "```",
        "",
        "Triton then loads every model of `models/` at start (`--model-control-mode` is `none` by default), on",
        "ports 8000 (HTTP), 8001 (gRPC) and 8002 (metrics). Models: " + (", ".join(exported.models) or "none") + ".",
    ]
    if exported.backends:
        lines += [
            "",
            "Python-based backends (`backends/<name>/model.py`) are mounted where the image looks for backends, "
            f"`{IMAGE_BACKENDS}/<name>/`.",
        ]
    if exported.left_out:
        lines += ["", "Left out:", ""] + [f"- `{name}`: {why}." for name, why in sorted(exported.left_out.items())]
    return "\n".join(lines) + "\n"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``labkit export-repository REPOSITORY DIR``: its arguments, and what it prints."""
    command = commands.add_parser(
        "export-repository",
        help="copy a lab's model repository as NVIDIA's 23.12 image serves it unchanged, and say how to start it",
    )
    command.add_argument("repository", help="the lab's model repository folder")
    command.add_argument("directory", help="a new folder to write models/, backends/ and README.md into")
    command.add_argument("--model", action="append", help="export only this model (repeatable)")
    command.add_argument("--backends", help="a folder of Python-based backends (<name>/model.py) the models name")
    command.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    exported = export_repository(args.repository, args.directory, models=args.model, backends=args.backends)
    print(f"wrote {exported.folder}/models ({', '.join(exported.models) or 'no model'})")
    for name, why in sorted(exported.left_out.items()):
        print(f"left out {name}: {why}")
    print(f"copy {exported.folder} to the machine with Docker; there, in it, NVIDIA's image serves it unchanged:")
    print(f"  {exported.command()}")
    return 0
