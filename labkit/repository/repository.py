"""A model repository on disk: one folder per model, config.pbtxt beside numbered version folders."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ..errors import ConfigError, MissingConfigError, RepositoryError
from . import config as _config
from .files import write_atomic, writing
from .names import check_name, check_relpath
from .python_source import model_source


class ModelRepository:
    """Reads and writes models below ``root``; names are checked before anything is written."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        with writing(self.root):
            self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"ModelRepository({str(self.root)!r})"

    def model_dir(self, name: str) -> Path:
        return self.root / check_name(name)

    def models(self) -> list[str]:
        """Names of the folders that hold a config.pbtxt."""
        return sorted(p.parent.name for p in self.root.glob("*/config.pbtxt"))

    def unconfigured(self) -> list[str]:
        """Names of the folders that hold a version folder and no config.pbtxt: models whose config only
        Triton's auto-complete can make."""
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir()
            and not (p / "config.pbtxt").exists()
            and any(v.is_dir() and v.name.isdigit() for v in p.iterdir())
        )

    def write_config(self, cfg: _config.ModelConfig) -> Path:
        check_name(cfg.name)
        _config.check_complete(cfg, f"config of model {cfg.name!r}")
        path = self.write_file(cfg.name, "config.pbtxt", _config.to_text(cfg), version=None)
        if not self.versions(cfg.name):
            # Triton serves no model without a version folder, even when the backend needs no files in it.
            with writing(path.parent / "1"):
                (path.parent / "1").mkdir()
        return path

    def write_config_text(self, name: str, text: str) -> Path:
        """Write ``text`` as ``<name>/config.pbtxt`` exactly as written (comments and layout kept), once it
        reads as Triton's ModelConfig and names this model (ConfigError, naming the field, if not); whether
        Triton can serve it, Triton says at load."""
        check_name(name)
        source = f"config.pbtxt of model {name!r}"
        cfg = _config.parse(text, source)
        if cfg.name and cfg.name != name:
            raise ConfigError(
                field="name",
                value=cfg.name,
                source=source,
                problem=f"the folder (and the model) is {name!r}",
                remedy="make them equal",
            )
        path = self.write_file(name, "config.pbtxt", text if text.endswith("\n") else text + "\n", version=None)
        if not self.versions(name):
            with writing(path.parent / "1"):
                (path.parent / "1").mkdir()
        return path

    def read_config(self, name: str) -> _config.ModelConfig:
        path = self.model_dir(name) / "config.pbtxt"
        if not path.exists():
            raise MissingConfigError(model=name, source=str(path))
        cfg = _config.read(path)
        if cfg.name and cfg.name != name:
            raise ConfigError(
                field="name",
                value=cfg.name,
                source=str(path),
                problem=f"the model's folder is {name!r}",
                remedy="make them equal",
            )
        return cfg

    def models_using(self, backend: str) -> list[str]:
        """Models whose config names ``backend``."""
        return [m for m in self.models() if self.read_config(m).backend == backend]

    def versions(self, name: str) -> list[int]:
        folder = self.model_dir(name)
        return (
            sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit()) if folder.exists() else []
        )

    def write_file(self, name: str, relpath: str, data: bytes | str, version: int | None = 1) -> Path:
        """Write a file into the model folder, or into its version folder when ``version`` is given."""
        folder = self.model_dir(name)
        if version is not None:
            if not isinstance(version, int) or version < 1:
                raise RepositoryError(
                    subject=f"Version {version!r} of {name!r}",
                    problem="is not a model version",
                    refused=version,
                    remedy="model versions are whole numbers from 1 up",
                )
            folder = folder / str(version)
        stamp = self._next_stamp(name)  # before the write, which erases the file's previous stamp
        path = write_atomic(folder / check_relpath(relpath), data)
        with writing(path):
            os.utime(path, (stamp, stamp))
        return path

    def _next_stamp(self, name: str) -> int:
        # Triton 2.41 compares whole-second modification times across the model folder, so two edits
        # within one second look unchanged to it: stamp each write one second past the newest.
        folder = self.model_dir(name)
        newest = max((int(p.stat().st_mtime) for p in folder.rglob("*")), default=0)
        return max(int(time.time()), newest + 1)

    def mark_changed(self, name: str) -> None:
        """Make Triton reload the model on the next load (e.g. after its Python-based backend changed).

        Triton treats a newer config.pbtxt alone as a config edit and may update the model in place;
        a newer version folder makes it rebuild the instances.
        """
        stamp = self._next_stamp(name)
        for version in self.versions(name):
            with writing(self.model_dir(name) / str(version)):
                os.utime(self.model_dir(name) / str(version), (stamp, stamp))

    def write_python_model(self, name: str, source: str | Path | type, version: int = 1) -> Path:
        """Write ``<name>/<version>/model.py`` from a string, a .py path, or a class."""
        return self.write_file(name, "model.py", model_source(source), version)

    def copy_model_from(self, other: str | Path, name: str) -> Path:
        """Copy model ``name`` from another repository folder into this one (replacing it)."""
        src = Path(other) / check_name(name)
        if not (src / "config.pbtxt").exists():
            raise MissingConfigError(
                model=name, source=str(src / "config.pbtxt"), remedy=f"copy a model {other} holds, with its config"
            )
        dst = self.model_dir(name)
        with writing(dst):
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        self.mark_changed(name)  # copies keep old times; a model loaded earlier under this name must reload
        return dst

    def remove_version(self, name: str, version: int) -> None:
        shutil.rmtree(self.model_dir(name) / str(int(version)), ignore_errors=True)
