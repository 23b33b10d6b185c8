"""Repositories, configs, C++ builds and model loads."""

from __future__ import annotations

from collections.abc import Sequence

from .root import LabkitError


class RepositoryError(LabkitError):
    """A model repository operation was refused or failed. ``missing``: what a model source or folder
    lacks (e.g. "TritonPythonModel"), when that is why; ``refused``: the value refused (e.g. a version)."""

    def __init__(self, message: str, *, missing: str = "", refused: object = None) -> None:
        self.missing = missing
        self.refused = refused
        super().__init__(message)


class InvalidNameError(RepositoryError, ValueError):
    """A model, backend or file name could escape the repository or is not allowed (``what`` says
    which kind of name, ``name`` is the name refused)."""

    def __init__(self, message: str, *, name: str = "", what: str = "") -> None:
        self.name = name
        self.what = what
        super().__init__(message)


class RepositoryWriteError(RepositoryError):
    """The file system refused to write ``path`` (read-only, full, no permission, name too long);
    ``errno`` is its error number (errno.EROFS, ...). Nothing was half-written."""

    def __init__(self, message: str, *, path: str, errno: int = 0) -> None:
        self.path = path
        self.errno = errno
        super().__init__(message)


class ConfigError(RepositoryError):
    """A config.pbtxt is malformed (unknown field, wrong type) or incomplete. ``field``: the field at
    fault (a misspelt name, a field given the wrong type), ``value`` the value refused and ``valid``
    the values allowed there; ``lacks``: what an incomplete config (or a model folder) lacks;
    ``source``: the file or config it is about."""

    def __init__(
        self,
        message: str,
        *,
        field: str = "",
        value: object = "",
        valid: Sequence[str] = (),
        lacks: Sequence[str] = (),
        source: str = "",
    ) -> None:
        self.field = field
        self.value = value
        self.valid = list(valid)
        self.lacks = list(lacks)
        self.source = source
        super().__init__(message)


class MissingConfigError(ConfigError):
    """Model ``model`` has no config.pbtxt where labkit (or Triton) reads it: ``source`` is the path of the
    missing file, ``lacks`` is ["config.pbtxt"] (``missing`` too, as a RepositoryError), ``remedy`` says what
    to do next (write one; or, where that fits, another folder or auto-complete). Nothing was loaded."""

    def __init__(self, *, model: str, source: str, remedy: str = "") -> None:
        self.model = model
        self.remedy = remedy or (
            f"write one first, e.g. lab.repository.write_config(labkit.model_config({model!r}, backend, inputs, outputs))"
        )
        super().__init__(
            f"Model {model!r} has no config.pbtxt at {source}; {self.remedy}.", lacks=["config.pbtxt"], source=source
        )
        self.missing = "config.pbtxt"


class RepositoryNotFoundError(RepositoryError):
    """A command was given ``path`` as its model repository, and there is no folder there; nothing was started."""

    def __init__(self, *, path: str) -> None:
        self.path = path
        super().__init__(f"No model repository at {path}; give a folder holding <model>/config.pbtxt.", refused=path)


class ModelLoadError(LabkitError):
    """Triton refused to load (or did not finish unloading) ``model``; ``reason`` is Triton's own words."""

    def __init__(self, message: str, *, model: str, reason: str = "", serving: Sequence[str] = ()) -> None:
        self.model = model
        self.reason = reason
        self.serving = list(serving)  # the models still serving after the failure
        super().__init__(message)


class LoadTimeoutError(ModelLoadError):
    """Loading ``model`` took longer than ``timeout_s`` seconds (its ``initialize`` or
    ``ModelInitialize`` did not return). ``stack``: where its code was (frames, innermost last), when
    labkit could read it; ``location``: the innermost of them as ``file:line`` ("" if unknown);
    ``ended``: whether labkit ended the stuck load (a Python stub can be; a thread inside Triton
    cannot, and the model then stays LOADING until the server restarts); ``interrupted``: a kernel
    interrupt ended the wait before ``timeout_s``."""

    def __init__(
        self,
        message: str,
        *,
        model: str,
        timeout_s: float,
        stack: str = "",
        location: str = "",
        ended: bool = False,
        interrupted: bool = False,
        reason: str = "",
    ) -> None:
        self.timeout_s = timeout_s
        self.interrupted = interrupted
        self.stack = stack
        self.location = location
        self.ended = ended
        super().__init__(message, model=model, reason=reason)


class EnsembleStepError(ModelLoadError):
    """Step ``step`` (from 0) of ensemble ``model`` cannot run: its ``step_model`` is "not in the
    repository", "did not load" (``reason``: Triton's words), or has no tensor ``tensor`` ("no such
    input"/"no such output"): ``problem`` says which. ``available``: the repository's models;
    ``refused_by``: "labkit" (before loading; nothing written) or "triton" (its load refusal)."""

    def __init__(
        self,
        message: str,
        *,
        model: str,
        step: int,
        step_model: str,
        problem: str,
        tensor: str = "",
        available: Sequence[str] = (),
        refused_by: str = "labkit",
        reason: str = "",
    ) -> None:
        self.step, self.step_model, self.problem, self.tensor = step, step_model, problem, tensor
        self.available, self.refused_by = list(available), refused_by
        super().__init__(message, model=model, reason=reason)


class MetricKindError(ModelLoadError):
    """``model`` defines the metric family ``metric`` as a ``kind`` ("counter" or "gauge"), and Triton
    already has a family of that name of ``registered_kind`` (defined by ``registered_by``, when
    labkit knows which loaded model did; Triton 23.12 keeps a family until it exits). labkit refused
    the load before Triton saw it."""

    def __init__(
        self, message: str, *, model: str, metric: str, kind: str, registered_kind: str, registered_by: str = ""
    ) -> None:
        self.metric, self.kind, self.registered_kind, self.registered_by = metric, kind, registered_kind, registered_by
        super().__init__(message, model=model)


class ExecutionEnvError(ModelLoadError):
    """labkit refused to load ``model`` before Triton saw it: the execution environment its config names
    (``EXECUTION_ENV_PATH``, resolved to ``environment``) cannot serve it. ``problem`` says why: "python"
    (the environment's Python ``found`` is not the ``needed`` Python of the stub that would run it),
    "numpy" (numpy ``found`` in the environment; the 23.12 stub needs ``needed``: numpy 1.x, else every
    output comes back empty), "missing" (nothing at that path), "no activate" (a folder without
    ``bin/activate``, which the stub sources)."""

    def __init__(
        self, message: str, *, model: str, environment: str, problem: str, found: str = "", needed: str = ""
    ) -> None:
        self.environment, self.problem, self.found, self.needed = environment, problem, found, needed
        super().__init__(message, model=model)


class MissingModuleError(ModelLoadError):
    """Triton could not load ``model``: its model.py imports ``module``, which the Python that runs its
    stub (version ``python``, e.g. "3.11") does not have. ``environment``: the model's execution
    environment (its ``EXECUTION_ENV_PATH`` as given), or "" when it has none and the stub runs the
    server's own Python."""

    def __init__(
        self, message: str, *, model: str, module: str, python: str, environment: str = "", reason: str = ""
    ) -> None:
        self.module, self.python, self.environment = module, python, environment
        super().__init__(message, model=model, reason=reason)


class BuildError(LabkitError):
    """A C++ backend did not compile, or the library lacks what Triton requires; nothing was loaded.

    ``compiler_output`` holds the compiler's messages (line numbers of the user's source), if any;
    ``missing_exports`` the entry points Triton requires that the library does not export;
    ``unavailable`` the Triton functions it calls that the 23.12 server does not have; ``undefined``
    the functions it calls that nothing defines (as the linker names them). Where the messages point at
    a place: ``file`` and ``line`` (a CMake file's, or the compiler's first error), ``command`` the
    command that failed (a CMake configure, or one compile of a CMake build), and ``flag`` the warning
    a ``-Werror`` turned into the error (e.g. "-Wmismatched-new-delete").
    """

    def __init__(
        self,
        message: str,
        *,
        backend: str = "",
        compiler_output: str = "",
        missing_exports: Sequence[str] = (),
        unavailable: Sequence[str] = (),
        undefined: Sequence[str] = (),
        file: str = "",
        line: int | None = None,
        command: str = "",
        flag: str = "",
    ) -> None:
        self.backend = backend
        self.undefined = list(undefined)
        self.compiler_output = compiler_output
        self.missing_exports = list(missing_exports)
        self.unavailable = list(unavailable)
        self.file, self.line, self.command, self.flag = file, line, command, flag
        super().__init__(message)
