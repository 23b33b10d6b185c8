"""A Python model's own packages, checked where labkit can tell from files and the runtime (never from
the words of Triton's message, which stay in ``reason``):

- before Triton loads a model whose config names an execution environment (``EXECUTION_ENV_PATH``):
  the environment's Python must be the one its stub embeds (another loads garbage into the stub), and its
  numpy must be 1.x (23.12's stub loads the model under numpy 2, then every output comes back empty);
- after Triton refused a Python model: a module its model.py imports that the stub's Python lacks
  (the server's own Python, or the model's environment), told as MissingModuleError with what to do.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Protocol

from ..errors import ExecutionEnvError, MissingModuleError, ModelLoadError
from ..python_envs.env_contents import EnvContents, read_env
from ..python_envs.stub_pythons import Version, stub_python, version_text
from ..repository import ModelConfig, ModelRepository
from .runtime import Runtime, Workspace

ENV_KEY = "EXECUTION_ENV_PATH"
#: Modules the stub itself puts on a model's sys.path (python_backend's utilities, beside libtriton_python.so).
STUB_PROVIDES = frozenset({"triton_python_backend_utils"})
MODEL_DIR = "$$TRITON_MODEL_DIRECTORY"
STUB = "triton_python_backend_stub"
#: Lists the names among argv that the Python running it cannot import (the stub's sys.path has the
#: model's folders too; those names are left out before asking).
_FIND = (
    "import importlib.util, sys\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        found = importlib.util.find_spec(name) is not None\n"
    "    except (ImportError, ValueError):\n"
    "        found = False\n"
    "    if not found:\n"
    "        print(name)\n"
)


class _Models(Protocol):
    """What these checks read (a server's ``models``)."""

    @property
    def repository(self) -> ModelRepository: ...

    @property
    def workspace(self) -> Workspace: ...

    runtime: Runtime


def environment(models: _Models, name: str, cfg: ModelConfig) -> tuple[str, Path | None]:
    """The model's EXECUTION_ENV_PATH as its config gives it ("" for none), and where it is on this
    machine (None when labkit cannot see it: an absolute path inside a container)."""
    given = cfg.parameters[ENV_KEY].string_value if ENV_KEY in cfg.parameters else ""
    if not given:
        return "", None
    if MODEL_DIR in given:
        return given, Path(given.replace(MODEL_DIR, str(models.repository.model_dir(name))))
    here = Path(models.runtime.host_path(given))
    return given, here if here.exists() or models.runtime.kind == "embedded" else None


def stub_version(models: _Models, name: str, cfg: ModelConfig) -> Version | None:
    """The Python of the stub that runs model ``name``: its own (a stub in its model folder wins, as
    python_backend looks there first), its Python-based backend's, or the runtime's."""
    own = models.repository.model_dir(name) / STUB
    if own.is_file():
        return stub_python(own)
    based = models.workspace.backend_dir / cfg.backend / STUB
    if cfg.backend != "python" and based.is_file():
        return stub_python(based)
    return models.runtime.stub_python()


def _contents(path: Path) -> EnvContents | None:
    try:
        return read_env(path)
    except (OSError, EOFError, ValueError):  # not there, or not an archive: Triton says it in its words
        return None


def check_environment(models: _Models, name: str) -> None:
    """ExecutionEnvError before Triton is asked, when model ``name``'s environment cannot serve it."""
    if not (models.repository.model_dir(name) / "config.pbtxt").is_file():
        return
    cfg = models.repository.read_config(name)
    given, path = environment(models, name, cfg)
    contents = _contents(path) if path is not None else None
    if contents is None:
        return
    stub = stub_version(models, name, cfg)
    if stub is not None and contents.python is not None and contents.python != stub:
        raise ExecutionEnvError(
            model=name,
            environment=str(path),
            problem="python",
            found=version_text(contents.python),
            needed=version_text(stub),
            remedy=(
                f"Build the environment for the stub (`labkit python-env {path} --package ... --replace`, or "
                f"labkit.python_env(..., python='{version_text(stub)}')), or give the model a stub for Python "
                f"{version_text(contents.python)} (a {STUB} in its folder, or a Python-based backend folder with its own)"
            ),
        )
    if contents.numpy and int(contents.numpy.split(".")[0]) >= 2:
        import numpy  # the lab's own: pinned below 2, as the stub needs

        raise ExecutionEnvError(
            model=name,
            environment=str(path),
            problem="numpy",
            found=contents.numpy,
            needed=f"<2 (1.x, as this lab's {numpy.__version__})",
            remedy="Install numpy<2 into it, or build it with `labkit python-env` (which pins numpy<2)",
        )


def imported_modules(source: str) -> list[str]:
    """The absolute imports model.py makes for sure: at module level and in ``initialize``, outside any
    ``try`` (an import guarded there may be meant to fail). In order, without repeats."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append(node.module)
            elif isinstance(node, ast.ClassDef):
                visit(node.body)
            elif isinstance(node, ast.FunctionDef) and node.name == "initialize":
                visit(node.body)

    visit(tree.body)
    return list(dict.fromkeys(found))


def _model_py(models: _Models, name: str, cfg: ModelConfig) -> tuple[Path | None, list[Path]]:
    """model.py of model ``name`` and the folders the stub puts on sys.path for it."""
    versions = models.repository.versions(name)
    model_dir = models.repository.model_dir(name)
    if cfg.backend == "python" and versions:
        version_dir = model_dir / str(versions[-1])
        return version_dir / "model.py", [version_dir, model_dir]
    shared = models.workspace.backend_dir / cfg.backend / "model.py"
    return shared, [shared.parent, model_dir]


def _local(name: str, folders: list[Path]) -> bool:
    top = name.split(".")[0]
    return any((f / f"{top}.py").is_file() or (f / top).is_dir() for f in folders)


def missing_module(models: _Models, name: str, error: ModelLoadError) -> MissingModuleError | None:
    """A MissingModuleError when the Python that runs model ``name``'s stub lacks a module its model.py
    imports for sure; None when all are there (the refusal has another cause)."""
    model_dir = models.repository.model_dir(name)
    if not (model_dir / "config.pbtxt").is_file():
        return None
    cfg = models.repository.read_config(name)
    source, folders = _model_py(models, name, cfg)
    if source is None or not source.is_file():
        return None
    wanted = [
        m
        for m in imported_modules(source.read_text())
        if not _local(m, folders) and m.split(".")[0] not in STUB_PROVIDES
    ]
    if not wanted:
        return None
    given, path = environment(models, name, cfg)
    stub = stub_version(models, name, cfg)
    python = version_text(stub) if stub else "?"
    if given:
        contents = _contents(path) if path is not None else None
        if contents is None:
            return None
        absent = [m for m in wanted if not contents.has_module(m)]
        todo = f"Rebuild the environment with it: labkit python-env {path} --package {{package}} --replace"
    else:
        code, out, _ = models.runtime.run_beside(["python", "-c", _FIND, *wanted])
        if code != 0:
            return None
        absent = out.split()
        env = model_dir / "env"
        todo = (
            f"Give the model an environment that has it:\n"
            f"    labkit python-env {env} --package {{package}}      (in Python: labkit.python_env(...))\n"
            f"and add to its config.pbtxt:\n"
            f'    parameters {{{{ key: "{ENV_KEY}" value {{{{ string_value: "{MODEL_DIR}/env" }}}} }}}}\n'
            f"or install {{package}} into the server's own environment"
        )
    if not absent:
        return None
    module = absent[0]
    top = module.split(".")[0]
    return MissingModuleError(
        model=name,
        module=module,
        python=python,
        environment=given,
        reason=error.reason,
        serving=error.serving,
        remedy=(
            todo.format(package=top)
            + f" (the package that provides {top!r} may have another name on PyPI). Then load it again"
        ),
    )
