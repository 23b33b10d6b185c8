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


class NotebookNotFoundError(LabkitError):
    """`labkit workshop` found no notebook to work on in ``folder``: none or several (``matches``) match
    ``name`` (a path, file name or number prefix), or, when ``name`` is "", the folder holds no lesson
    notebook (NN_name.ipynb). ``known``: the notebooks it holds. Nothing was changed."""

    def __init__(self, *, folder: str, name: str = "", known: Sequence[str] = (), matches: Sequence[str] = ()) -> None:
        self.folder, self.name, self.known, self.matches = folder, name, list(known), list(matches)
        if name:
            found = f"{name!r} matches {', '.join(self.matches)}" if self.matches else f"No notebook matches {name!r}"
            message = f"{found} in {folder}; give a path or one of: {', '.join(self.known)}."
        else:
            message = f"No lesson notebooks (NN_name.ipynb) in {folder}; give --dir, the notebooks folder."
        super().__init__(message)


class LessonOutcomeError(LabkitError):
    """A lesson's demonstration did not happen as Triton 23.12 (and labkit) make it happen: ``model``
    ``happened`` (e.g. "answered"), although ``expected`` (what should have stopped it); ``check`` says
    what to look at."""

    def __init__(self, *, model: str, happened: str, expected: str, check: str) -> None:
        self.model, self.happened, self.expected, self.check = model, happened, expected, check
        super().__init__(f"{model} {happened}, although {expected}; {check}.")


class AlreadyRanError(LabkitError):
    """``what`` (e.g. "dashboard") runs once, and it has run; ``remedy`` says how to run again."""

    def __init__(self, *, what: str, remedy: str) -> None:
        self.what, self.remedy = what, remedy
        super().__init__(f"This {what} has already run; {remedy}.")


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


class RoomFileError(LabkitError):
    """A workshop room's file or folder at ``path`` could not be used. ``problem``: "no room" (no room folder
    there), "unreadable" (the room's progress file; ``detail`` says why), "unwritable" (the CSV file asked
    for; ``detail``: the system's words). Nothing was changed."""

    _SAID = {
        "no room": ("No room at {path}", "give the folder `labkit room up --dir` made (--dir)"),
        "unreadable": (
            "Cannot read the room's progress from {path}",
            "remove the file and the board judges every saved notebook again",
        ),
        "unwritable": ("Cannot write {path}", "give another --csv path"),
    }

    def __init__(self, *, path: str, problem: str, detail: str = "") -> None:
        self.path, self.problem, self.detail = path, problem, detail
        what, remedy = self._SAID[problem]
        super().__init__(what.format(path=path) + (f" ({detail})" if detail else "") + f"; {remedy}.")


class LabKernelError(LabkitError):
    """A kernel started in ``user``'s lab (by `labkit room bench`) did not run ``code``. ``problem``: "no answer"
    (its websocket broke; ``errors`` holds why), "failed" (``errors``: the kernel's "ename: evalue" lines, or
    its reply when it sent none)."""

    def __init__(self, *, user: str, code: str, problem: str, errors: Sequence[str] = ()) -> None:
        self.user, self.code, self.problem, self.errors = user, code, problem, list(errors)
        said = "; ".join(self.errors)
        if problem == "no answer":
            message = f"The kernel of {user}'s lab stopped answering ({said}); read its container's log."
        else:
            message = f"`{code}` failed in {user}'s lab: {said}. Run it in that lab to read its traceback."
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
