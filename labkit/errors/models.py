"""Repositories, configs, C++ builds and model loads."""

from __future__ import annotations

from collections.abc import Sequence

from .root import LabkitError, block, mention


def _listed(items: Sequence[object], empty: str = "none") -> str:
    return ", ".join(map(str, items)) or empty


class RepositoryError(LabkitError):
    """A model repository operation was refused or failed: ``subject`` (a folder, a class, a version) ``problem``
    (what is wrong with it). ``missing``: what a model source or folder lacks (e.g. "TritonPythonModel"),
    when that is why; ``refused``: the value refused (e.g. a version)."""

    def __init__(
        self,
        *,
        subject: str = "",
        problem: str = "",
        missing: str = "",
        refused: object = None,
        remedy: str = "",
    ) -> None:
        self.subject = subject
        self.problem = problem
        self.missing = missing
        self.refused = refused
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        text = " ".join(part for part in (self.subject, self.problem) if part) or "The repository refused"
        if self.missing and self.missing not in text:
            text += f" (it lacks {self.missing})"
        if self.refused not in (None, "", []) and str(self.refused) not in text:
            text += f" (refused: {self.refused!r})"
        return text


class InvalidNameError(RepositoryError, ValueError):
    """A model, backend or file name could escape the repository or is not allowed (``what`` says
    which kind of name, ``name`` is the name refused, ``problem`` what is wrong with it)."""

    def __init__(self, *, name: str, what: str, problem: str, remedy: str = "") -> None:
        self.name = name
        self.what = what
        super().__init__(problem=problem, remedy=remedy)

    def _headline(self) -> str:
        return f"The {self.what} {self.name!r} {self.problem}"


class RepositoryWriteError(RepositoryError):
    """The file system refused to write ``path`` (read-only, full, no permission, name too long);
    ``errno`` is its error number (errno.EROFS, ...), ``detail`` the system's words. Nothing was half-written."""

    def __init__(self, *, path: str, errno: int = 0, detail: str = "", remedy: str = "") -> None:
        self.path = path
        self.errno = errno
        self.detail = detail
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        return f"Could not write {self.path}: {self.detail or 'refused'}" + (
            f" (errno {self.errno})" if self.errno else ""
        )


class ConfigError(RepositoryError):
    """A config.pbtxt (or an argument that writes into one) is malformed or incomplete. ``field``: the field
    at fault (a misspelt name, a field given the wrong type), ``value`` the value refused and ``valid``
    the values allowed there; ``lacks``: what an incomplete config (or a model folder) lacks;
    ``source``: the file or config it is about; ``problem``: what is wrong, in words."""

    def __init__(
        self,
        *,
        field: str = "",
        value: object = "",
        valid: Sequence[str] = (),
        lacks: Sequence[str] = (),
        source: str = "",
        problem: str = "",
        remedy: str = "",
    ) -> None:
        self.field = field
        self.value = value
        self.valid = list(valid)
        self.lacks = list(lacks)
        self.source = source
        super().__init__(problem=problem, remedy=remedy)

    def _headline(self) -> str:
        parts = [self.source] if self.source else []
        if self.field:
            parts.append(f"{self.field}={self.value!r}" if self.value not in ("", None) else self.field)
        problem = self.problem or (f"lacks {_listed(self.lacks)}" if self.lacks else "is not valid")
        text = ": ".join([*parts, problem]) if parts else problem
        if self.lacks and _listed(self.lacks) not in text:
            text += f" (it lacks {_listed(self.lacks)})"
        if self.valid:
            text += f" (valid: {_listed(self.valid)})"
        return text


class MissingConfigError(ConfigError):
    """Model ``model`` has no config.pbtxt where labkit (or Triton) reads it: ``source`` is the path of the
    missing file, ``lacks`` is ["config.pbtxt"] (``missing`` too, as a RepositoryError), ``remedy`` says what
    to do next (write one; or, where that fits, another folder or auto-complete). Nothing was loaded."""

    def __init__(self, *, model: str, source: str, remedy: str = "") -> None:
        self.model = model
        super().__init__(
            lacks=["config.pbtxt"],
            source=source,
            remedy=remedy
            or (
                "write one first, e.g. lab.repository.write_config("
                f"labkit.model_config({model!r}, backend, inputs, outputs))"
            ),
        )
        self.missing = "config.pbtxt"

    def _headline(self) -> str:
        return f"Model {self.model!r} has no config.pbtxt at {self.source}"


class RepositoryNotFoundError(RepositoryError):
    """A command was given ``path`` as its model repository, and there is no folder there; nothing was started."""

    def __init__(self, *, path: str) -> None:
        self.path = path
        super().__init__(refused=path, remedy="give a folder holding <model>/config.pbtxt")

    def _headline(self) -> str:
        return f"No model repository at {self.path}"


class ModelLoadError(LabkitError):
    """Triton refused to load (or did not finish unloading) ``model``: it ``happened`` (a few words: "could
    not be loaded"); ``reason`` is Triton's own words; ``detail``: more of the server's words (its log
    during the load, how a stub ended); ``serving``: the models still serving after the failure."""

    def __init__(
        self,
        *,
        model: str,
        reason: str = "",
        serving: Sequence[str] | None = None,
        happened: str = "could not be loaded",
        detail: str = "",
        remedy: str = "",
    ) -> None:
        self.model = model
        self.reason = reason
        self.serving = list(serving or [])
        self._serving_known = serving is not None
        self.happened = happened
        self.detail = detail
        super().__init__(remedy=remedy)

    def _said_by_triton(self, text: str) -> str:
        return f"{text}: {self.reason}" if self.reason and not block(self.reason) else text

    def _headline(self) -> str:
        return self._said_by_triton(f"Model {self.model!r} {self.happened}")

    def _compose(self) -> str:
        text = super()._compose()
        if self._serving_known or self.serving:
            first, _, rest = text.partition("\n")
            text = f"{first} Models still serving: {_listed(self.serving)}." + (f"\n{rest}" if rest else "")
        return text

    def _blocks(self) -> list[tuple[str, str]]:
        return [("Triton said", block(self.reason)), ("more from the server", self.detail)]


class LoadTimeoutError(ModelLoadError):
    """Loading ``model`` took longer than ``timeout_s`` seconds (its ``initialize`` or
    ``ModelInitialize`` did not return). ``stack``: where its code was (frames, innermost last), when
    labkit could read it; ``location``: the innermost of them as ``file:line`` ("" if unknown);
    ``ended``: whether labkit ended the stuck load (a Python stub can be; a thread inside Triton
    cannot, and the model then stays LOADING until the server restarts); ``interrupted``: a kernel
    interrupt ended the wait before ``timeout_s``, after ``waited_s``."""

    def __init__(
        self,
        *,
        model: str,
        timeout_s: float,
        stack: str = "",
        location: str = "",
        ended: bool = False,
        interrupted: bool = False,
        waited_s: float = 0.0,
        reason: str = "",
        remedy: str = "",
    ) -> None:
        self.timeout_s = timeout_s
        self.interrupted = interrupted
        self.waited_s = waited_s
        self.stack = stack
        self.location = location
        self.ended = ended
        super().__init__(model=model, reason=reason, remedy=remedy)

    def _headline(self) -> str:
        if self.interrupted:
            text = (
                f"You interrupted loading {self.model!r} after {self.waited_s:.1f} s (its limit: {self.timeout_s:g} s)"
            )
        else:
            text = (
                f"Loading {self.model!r} did not finish within {self.timeout_s:g} s: its initialization did not return"
            )
        if self.location:
            text += f"; it was at {self.location}"
        if not self.stack:
            text += "; labkit found none of its code running"
        text += "; labkit ended the stuck load" if self.ended else "; the load was not ended"
        return self._said_by_triton(text)

    def _blocks(self) -> list[tuple[str, str]]:
        return [("where its code was (live stack)", self.stack), *super()._blocks()]


class EnsembleStepError(ModelLoadError):
    """Step ``step`` (from 0) of ensemble ``model`` cannot run: its ``step_model`` is "not in the
    repository", "did not load" (``reason``: Triton's words), or has no tensor ``tensor`` ("no such
    input"/"no such output"; ``tensors``: those it has): ``problem`` says which. ``available``: the
    repository's models; ``refused_by``: "labkit" (before loading; nothing written) or "triton" (its load
    refusal, ``detail``: its whole text)."""

    def __init__(
        self,
        *,
        model: str,
        step: int,
        step_model: str,
        problem: str,
        tensor: str = "",
        tensors: Sequence[str] = (),
        available: Sequence[str] = (),
        refused_by: str = "labkit",
        reason: str = "",
        detail: str = "",
        serving: Sequence[str] | None = None,
        remedy: str = "",
    ) -> None:
        self.step, self.step_model, self.problem, self.tensor = step, step_model, problem, tensor
        self.tensors, self.available, self.refused_by = list(tensors), list(available), refused_by
        super().__init__(model=model, reason=reason, serving=serving, detail=detail, remedy=remedy)

    def _headline(self) -> str:
        head = f"Triton refused ensemble {self.model!r}: step" if self.refused_by == "triton" else "Step"
        text = f"{head} {self.step} of ensemble {self.model!r} names model {self.step_model!r}"
        if self.problem == "did not load":
            text = f"{text}, which did not load: {self.reason.strip() or 'see lab.logs.tail()'}"
        elif self.problem.startswith("no such"):
            kind = self.problem.removeprefix("no such ")
            text = f"{text}, which has no {kind} {self.tensor!r} (its {kind}s: {_listed(self.tensors)})"
        else:
            text = f"{text}, which is {self.problem} (it has: {_listed(self.available, 'nothing')})"
        for label, value in (("tensor ", self.tensor), ("its tensors: ", self.tensors), ("Triton: ", self.reason)):
            text = mention(text, label, value if not block(str(value)) else "")
        return mention(text, "the repository has: ", self.available)


class MetricKindError(ModelLoadError):
    """``model`` defines the metric family ``metric`` as a ``kind`` ("counter" or "gauge"), and Triton
    already has a family of that name of ``registered_kind`` (defined by ``registered_by``, when
    labkit knows which loaded model did; Triton 23.12 keeps a family until it exits). labkit refused
    the load before Triton saw it."""

    def __init__(self, *, model: str, metric: str, kind: str, registered_kind: str, registered_by: str = "") -> None:
        self.metric, self.kind, self.registered_kind, self.registered_by = metric, kind, registered_kind, registered_by
        super().__init__(
            model=model,
            remedy=(
                "A family keeps its kind as long as the server runs, also after the model that defined it "
                f"unloads. Give this family another name, keep it a {registered_kind}, or lab.restart() without "
                "that model loaded"
            ),
        )

    def _headline(self) -> str:
        by = f" (defined by model {self.registered_by!r})" if self.registered_by else ""
        return (
            f"Model {self.model!r} defines metric family {self.metric!r} as a {self.kind}, but Triton already has "
            f"it as a {self.registered_kind}{by}; labkit did not load it (Triton 23.12 can crash on such a load)"
        )


class ExecutionEnvError(ModelLoadError):
    """labkit refused to load ``model`` before Triton saw it: the execution environment its config names
    (``EXECUTION_ENV_PATH``, resolved to ``environment``) cannot serve it. ``problem`` says why: "python"
    (the environment's Python ``found`` is not the ``needed`` Python of the stub that would run it),
    "numpy" (numpy ``found`` in the environment; the 23.12 stub needs ``needed``: numpy 1.x, else every
    output comes back empty), "missing" (nothing at that path), "no activate" (a folder without
    ``bin/activate``, which the stub sources)."""

    _SAYS = {
        "python": "holds Python {found}, but the stub that would run it embeds Python {needed}",
        "numpy": (
            "has numpy {found}, and Triton 23.12's Python stub needs numpy {needed}: under numpy 2 the model "
            "loads, then every output comes back empty ('output tensor shape does not match size of output')"
        ),
        "missing": "is not there",
        "no activate": "has no bin/activate, which the stub sources",
    }

    def __init__(
        self, *, model: str, environment: str, problem: str, found: str = "", needed: str = "", remedy: str = ""
    ) -> None:
        self.environment, self.problem, self.found, self.needed = environment, problem, found, needed
        super().__init__(model=model, remedy=remedy)

    def _headline(self) -> str:
        says = self._SAYS.get(self.problem, "cannot serve it ({problem})").format(**vars(self))
        text = f"labkit did not load model {self.model!r}: its execution environment {self.environment} {says}"
        for value in (self.found, self.needed):
            if value and value not in text:
                text += f" ({value})"
        return text


class MissingModuleError(ModelLoadError):
    """Triton could not load ``model``: its model.py imports ``module``, which the Python that runs its
    stub (version ``python``, e.g. "3.11") does not have. ``environment``: the model's execution
    environment (its ``EXECUTION_ENV_PATH`` as given), or "" when it has none and the stub runs the
    server's own Python. ``reason``: Triton's words."""

    def __init__(
        self,
        *,
        model: str,
        module: str,
        python: str,
        environment: str = "",
        reason: str = "",
        serving: Sequence[str] | None = None,
        remedy: str = "",
    ) -> None:
        self.module, self.python, self.environment = module, python, environment
        super().__init__(model=model, reason=reason, serving=serving, remedy=remedy)

    def _headline(self) -> str:
        if self.environment:
            where = f"its execution environment {self.environment} (Python {self.python})"
        else:
            where = (
                f"Python {self.python} of its stub (the server's own environment: no EXECUTION_ENV_PATH in its config)"
            )
        return f"Triton could not load model {self.model!r}: its model.py imports {self.module!r}, which {where} does not have"

    def _blocks(self) -> list[tuple[str, str]]:
        return [("Triton said", self.reason)]


class BuildError(LabkitError):
    """A C++ backend did not compile, or the library lacks what Triton requires; nothing was loaded.

    ``backend``: its name, and ``problem`` what happened to it ("did not compile"). ``compiler_output``
    holds the compiler's messages (line numbers of the user's source), if any; ``missing_exports`` the
    entry points Triton requires that the library does not export; ``unavailable`` the Triton functions it
    calls that the 23.12 server does not have; ``undefined`` the functions it calls that nothing defines
    (as the linker names them). Where the messages point at a place: ``file`` and ``line`` (a CMake
    file's, or the compiler's first error), ``command`` the command that failed (a CMake configure, or
    one compile of a CMake build), and ``flag`` the warning a ``-Werror`` turned into the error (e.g.
    "-Wmismatched-new-delete").
    """

    def __init__(
        self,
        *,
        backend: str = "",
        problem: str = "did not build",
        compiler_output: str = "",
        missing_exports: Sequence[str] = (),
        unavailable: Sequence[str] = (),
        undefined: Sequence[str] = (),
        file: str = "",
        line: int | None = None,
        command: str = "",
        flag: str = "",
        remedy: str = "",
    ) -> None:
        self.backend = backend
        self.problem = problem
        self.undefined = list(undefined)
        self.compiler_output = compiler_output
        self.missing_exports = list(missing_exports)
        self.unavailable = list(unavailable)
        self.file, self.line, self.command, self.flag = file, line, command, flag
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        text = f"Backend {self.backend!r} {self.problem}" if self.backend else self.problem
        if self.file:
            text += f" at {self.file}" + (f":{self.line}" if self.line is not None else "")
        if self.flag:
            text += f": its own -Werror made the warning {self.flag} an error"
        if self.missing_exports:
            text += f"; it does not export {_listed(self.missing_exports)}"
        if self.unavailable:
            text += f"; it calls {_listed(self.unavailable)}, which Triton 23.12 does not have"
        if self.undefined:
            text += (
                f"; it calls {_listed(self.undefined)}, which nothing defines (not the backend, its libraries, "
                "nor Triton 23.12)"
            )
        return text if "not loaded" in text or "not built" in text else text + "; nothing was loaded"

    def _blocks(self) -> list[tuple[str, str]]:
        return [("the command", self.command), ("compiler messages", self.compiler_output.strip()[-4000:])]
