"""The tools around the lab: perf_analyzer, traces, exercises, protocols, room settings."""

from __future__ import annotations

from collections.abc import Sequence

from .root import LabkitError


class PerfAnalyzerError(LabkitError):
    """perf_analyzer failed. ``exit_code`` is its exit status (None when labkit refused to start it,
    e.g. an input needs a size); ``output`` holds its own last words."""

    def __init__(self, message: str, *, exit_code: int | None = None, output: str = "") -> None:
        self.exit_code = exit_code
        self.output = output
        if output:
            message = f"{message}\n--- perf_analyzer said ---\n{output}"
        super().__init__(message)


class UnstableMeasurementError(PerfAnalyzerError):
    """perf_analyzer's last measurement windows disagreed by more than the allowed percentage (its exit
    status 2): the machine was busy, or the windows were too short for the load."""


class TraceError(LabkitError):
    """Triton's request traces could not be switched on, or their file did not appear."""


class UnknownExerciseError(LabkitError):
    """A notebook cell is tagged ``exercise:<id>`` with an ``exercise`` id labkit does not know;
    ``notebook`` is the file, ``known`` the ids that exist. Nothing was changed."""

    def __init__(self, *, exercise: str, notebook: str, known: Sequence[str]) -> None:
        self.exercise, self.notebook, self.known = exercise, notebook, list(known)
        super().__init__(
            f"{notebook}: a cell is tagged 'exercise:{exercise}', and there is no exercise {exercise!r} "
            f"(nothing was changed). Fix the cell's tag; the exercises are: {', '.join(self.known)}."
        )


class CourseError(LabkitError):
    """A lesson notebook lacks what the course's plan reads (``field``: "labkit.minutes" or "labkit.core"
    in the notebook's metadata, or its opening title), or holds a value it cannot use; ``notebook`` is the
    file. Nothing was changed."""

    def __init__(self, *, notebook: str, field: str, problem: str) -> None:
        self.notebook, self.field, self.problem = notebook, field, problem
        super().__init__(
            f'{notebook}: {field} {problem}. Give the notebook\'s metadata a "labkit" entry such as '
            '{"minutes": 45, "core": true} (minutes with its exercises; core: on the day\'s core path).'
        )


class UnknownProtocolError(LabkitError, ValueError):
    """A ``protocol=`` that labkit does not speak (``protocol`` is the value given, ``known`` the ones
    it does: "http" and "grpc"). Also a ValueError, as a bad argument."""

    def __init__(self, *, protocol: object, known: Sequence[str]) -> None:
        self.protocol, self.known = protocol, list(known)
        super().__init__(f"protocol must be {' or '.join(map(repr, self.known))}, not {protocol!r}.")


class OptionError(LabkitError, ValueError):
    """An argument of a labkit call that it cannot use: ``option`` names it, ``value`` is what was given and
    ``valid`` says what it takes; nothing was started. Also a ValueError, as a bad argument."""

    def __init__(self, *, option: str, value: object, valid: str) -> None:
        self.option, self.value, self.valid = option, value, valid
        super().__init__(f"{option} must be {valid}, not {value!r}.")


class RoomSettingsError(LabkitError, ValueError):
    """A workshop room's ``setting`` (a RoomSettings field or option, e.g. "memory") holds a ``value`` that
    the hub, the Zero to JupyterHub chart or KubeSpawner would refuse; nothing was started or written.
    Also a ValueError, as a bad argument."""

    def __init__(self, message: str, *, setting: str, value: str) -> None:
        self.setting = setting
        self.value = value
        super().__init__(message)


class SubmissionError(LabkitError):
    """A participant's saved notebook could not be read for the grader or handed to it. ``problem``:
    "too-large" (its exercise cells pass the grader's limit), "not-a-submission" (the grader's input is
    not one the board wrote), "refused" (the hub or the lab answered ``status_code`` 401/403: the token
    lacks a scope), "unreadable" (the saved file is not a notebook: judged again at its next save),
    "unreachable" (no answer, or another status: read again at the next scan)."""

    def __init__(self, message: str, *, user: str = "", notebook: str = "", problem: str, status_code: int = 0) -> None:
        self.user, self.notebook, self.problem, self.status_code = user, notebook, problem, status_code
        super().__init__(message)


class HubError(LabkitError):
    """The room's hub, or a lab or the board behind its proxy, at ``url`` refused a request (``status_code``:
    401/403 when the token lacks a scope) or gave no usable answer (0)."""

    def __init__(self, message: str, *, url: str, status_code: int = 0) -> None:
        self.url, self.status_code = url, status_code
        super().__init__(message)


class BoardError(HubError):
    """The teacher's board at ``url`` did not give its table: ``status_code`` 401/403 (the token is not the
    teacher's), another status, or 0 (no answer)."""


class PythonEnvError(LabkitError):
    """An execution environment for Python models could not be made. ``problem``: "python" (``wanted`` is
    a Python that no stub of ``runtime`` has; those it has are ``available``), "interpreter" (no Python
    ``wanted`` on this machine), "pip" (pip could not install the packages; ``output`` is its last
    lines), "exists" (``path`` is there already and replacing it was not asked), "requirements" (the
    requirements file ``path`` cannot be read). ``model``: the model whose requirements.txt it was, if any."""

    def __init__(
        self,
        message: str,
        *,
        problem: str,
        wanted: str = "",
        available: Sequence[str] = (),
        runtime: str = "",
        path: str = "",
        output: str = "",
        model: str = "",
    ) -> None:
        self.problem, self.wanted, self.available, self.runtime = problem, wanted, list(available), runtime
        self.path, self.output, self.model = path, output, model
        super().__init__(message)
