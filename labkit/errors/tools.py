"""The tools around the lab: perf_analyzer, traces, exercises, protocols, room settings."""

from __future__ import annotations

from collections.abc import Sequence

from .root import LabkitError, block, mention, said


def _listed(items: Sequence[object], empty: str = "none") -> str:
    return ", ".join(map(str, items)) or empty


class PerfAnalyzerError(LabkitError):
    """perf_analyzer failed, or labkit refused to start it: on ``model`` at ``at`` (a load point, e.g.
    "concurrency 4") it ``problem`` (what happened, in words). ``exit_code`` is its exit status (None
    when labkit refused to start it, e.g. an input needs a size); ``output`` holds its own last words."""

    def __init__(
        self,
        *,
        problem: str,
        model: str = "",
        at: str = "",
        exit_code: int | None = None,
        output: str = "",
        remedy: str = "",
    ) -> None:
        self.problem = problem
        self.model = model
        self.at = at
        self.exit_code = exit_code
        self.output = output
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        text = "perf_analyzer" + (f" on {self.model!r}" if self.model else "") + (f" at {self.at}" if self.at else "")
        text += f" {self.problem}"
        return text + (f" (exit status {self.exit_code})" if self.exit_code is not None else "")

    def _blocks(self) -> list[tuple[str, str]]:
        return [("perf_analyzer said", self.output)]


class UnstableMeasurementError(PerfAnalyzerError):
    """perf_analyzer's last measurement windows disagreed by more than the allowed percentage (its exit
    status 2): the machine was busy, or the windows were too short for the load."""


class TraceError(LabkitError):
    """Triton's request traces of ``model`` could not be switched on, or their file did not appear: ``problem``
    says what happened; ``detail``: Triton's words."""

    def __init__(self, *, problem: str, model: str = "", detail: str = "", remedy: str = "") -> None:
        self.problem, self.model, self.detail = problem, model, detail
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        about = f"Triton's traces of {self.model!r}" if self.model else "Triton's traces"
        return said(f"{about}: {self.problem}", self.detail)

    def _blocks(self) -> list[tuple[str, str]]:
        return [("Triton said", block(self.detail))]


class UnknownExerciseError(LabkitError):
    """A notebook cell is tagged ``exercise:<id>`` with an ``exercise`` id labkit does not know;
    ``notebook`` is the file, ``known`` the ids that exist. Nothing was changed."""

    def __init__(self, *, exercise: str, notebook: str, known: Sequence[str]) -> None:
        self.exercise, self.notebook, self.known = exercise, notebook, list(known)
        super().__init__(remedy=f"Fix the cell's tag; the exercises are: {_listed(self.known)}")

    def _headline(self) -> str:
        return (
            f"{self.notebook}: a cell is tagged 'exercise:{self.exercise}', and there is no exercise "
            f"{self.exercise!r} (nothing was changed)"
        )


class CourseError(LabkitError):
    """A lesson notebook lacks what the course's plan reads (``field``: "labkit.minutes" or "labkit.core"
    in the notebook's metadata, or its opening title), or holds a value it cannot use; ``notebook`` is the
    file. Nothing was changed."""

    def __init__(self, *, notebook: str, field: str, problem: str) -> None:
        self.notebook, self.field, self.problem = notebook, field, problem
        super().__init__(
            remedy=(
                'Give the notebook\'s metadata a "labkit" entry such as {"minutes": 45, "core": true} (minutes '
                "with its exercises; core: on the day's core path)"
            )
        )

    def _headline(self) -> str:
        return f"{self.notebook}: {self.field} {self.problem}"


class NotebookNotFoundError(LabkitError):
    """`labkit workshop` found no notebook to work on in ``folder``: none or several (``matches``) match
    ``name`` (a path, file name or number prefix), or, when ``name`` is "", the folder holds no lesson
    notebook (NN_name.ipynb). ``known``: the notebooks it holds. Nothing was changed."""

    def __init__(self, *, folder: str, name: str = "", known: Sequence[str] = (), matches: Sequence[str] = ()) -> None:
        self.folder, self.name, self.known, self.matches = folder, name, list(known), list(matches)
        remedy = f"give a path or one of: {_listed(self.known)}" if name else "give --dir, the notebooks folder"
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        if not self.name:
            return f"No lesson notebooks (NN_name.ipynb) in {self.folder}"
        if self.matches:
            return f"{self.name!r} matches {_listed(self.matches)} in {self.folder}"
        return f"No notebook matches {self.name!r} in {self.folder}"


class LessonOutcomeError(LabkitError):
    """A lesson's demonstration did not happen as Triton 23.12 (and labkit) make it happen: ``model``
    ``happened`` (e.g. "answered"), although ``expected`` (what should have stopped it); ``check`` says
    what to look at."""

    def __init__(self, *, model: str, happened: str, expected: str, check: str) -> None:
        self.model, self.happened, self.expected, self.check = model, happened, expected, check
        super().__init__(remedy=check)

    def _headline(self) -> str:
        return f"{self.model} {self.happened}, although {self.expected}"


class AlreadyRanError(LabkitError):
    """``what`` (e.g. "dashboard") runs once, and it has run; ``remedy`` says how to run again."""

    def __init__(self, *, what: str, remedy: str) -> None:
        self.what = what
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        return f"This {self.what} has already run"


class UnknownProtocolError(LabkitError, ValueError):
    """A ``protocol=`` that labkit does not speak (``protocol`` is the value given, ``known`` the ones
    it does: "http" and "grpc"). Also a ValueError, as a bad argument."""

    def __init__(self, *, protocol: object, known: Sequence[str]) -> None:
        self.protocol, self.known = protocol, list(known)
        super().__init__()

    def _headline(self) -> str:
        return f"protocol must be {' or '.join(map(repr, self.known))}, not {self.protocol!r}"


class OptionError(LabkitError, ValueError):
    """An argument of a labkit call that it cannot use: ``option`` names it, ``value`` is what was given and
    ``valid`` says what it takes; nothing was started. Also a ValueError, as a bad argument."""

    def __init__(self, *, option: str, value: object, valid: str) -> None:
        self.option, self.value, self.valid = option, value, valid
        super().__init__()

    def _compose(self) -> str:  # begins with the option's name, as written (no capital)
        return f"{self.option} must be {self.valid}, not {self.value!r}."


class RoomSettingsError(LabkitError, ValueError):
    """A workshop room's ``setting`` (a RoomSettings field or option, e.g. "memory") holds a ``value`` that
    the hub, the Zero to JupyterHub chart or KubeSpawner would refuse (``problem``: why); nothing was started
    or written. Also a ValueError, as a bad argument."""

    def __init__(self, *, setting: str, value: str, problem: str, remedy: str = "") -> None:
        self.setting = setting
        self.value = value
        self.problem = problem
        super().__init__(remedy=remedy)

    def _compose(self) -> str:  # begins with the setting's name, as written (no capital)
        text = super()._compose()
        return self.setting + text[len(self.setting) :] if text.lower().startswith(self.setting.lower()) else text

    def _headline(self) -> str:
        return f"{self.setting}={self.value!r} {self.problem}"


class SubmissionError(LabkitError):
    """A participant's saved notebook could not be read for the grader or handed to it. ``problem``:
    "too-large" (its exercise cells pass the grader's limit), "not-a-submission" (the grader's input is
    not one the board wrote), "refused" (the hub or the lab answered ``status_code`` 401/403: the token
    lacks a scope), "unreadable" (the saved file is not a notebook: judged again at its next save),
    "unreachable" (no answer, or another status: read again at the next scan). ``detail``: the words
    of whatever refused it."""

    _SAID = {
        "too-large": ("{user}'s {notebook}: its exercise cells are more than the grader takes", ""),
        "not-a-submission": ("The grader's input is not a submission", ""),
        "refused": ("Reading {user}'s {notebook} was refused", ""),
        "unreadable": ("{user}'s {notebook} is not a notebook Jupyter can read", "it is judged again at its next save"),
        "unreachable": ("Cannot read {user}'s {notebook}", "it is read again at the next scan"),
    }

    def __init__(
        self,
        *,
        user: str = "",
        notebook: str = "",
        problem: str,
        status_code: int = 0,
        detail: str = "",
        remedy: str = "",
    ) -> None:
        self.user, self.notebook, self.problem, self.status_code, self.detail = (
            user,
            notebook,
            problem,
            status_code,
            detail,
        )
        super().__init__(remedy=remedy or self._SAID[problem][1])

    def _headline(self) -> str:
        text = self._SAID[self.problem][0].format(user=self.user, notebook=self.notebook)
        if self.status_code:
            text += f" (HTTP {self.status_code})"
        return said(text, self.detail)


class RoomFileError(LabkitError):
    """A workshop room's file or folder at ``path`` could not be used. ``problem``: "no room" (no room folder
    there), "unreadable" (the room's progress file; ``detail`` says why), "unwritable" (the CSV file asked
    for; ``detail``: the system's words), "copy unwritable" (the board's copy of a saved notebook). Nothing was
    changed."""

    _SAID = {
        "no room": ("No room at {path}", "give the folder `labkit room up --dir` made (--dir)"),
        "unreadable": (
            "Cannot read the room's progress from {path}",
            "remove the file and the board judges every saved notebook again",
        ),
        "unwritable": ("Cannot write {path}", "give another --csv path"),
        "copy unwritable": (
            "Cannot keep the board's copy of a saved notebook at {path}",
            "check the room folder's disk and permissions: the next save is copied again",
        ),
    }

    def __init__(self, *, path: str, problem: str, detail: str = "") -> None:
        self.path, self.problem, self.detail = path, problem, detail
        super().__init__(remedy=self._SAID[problem][1])

    def _headline(self) -> str:
        return self._SAID[self.problem][0].format(path=self.path) + (f" ({self.detail})" if self.detail else "")


class LabKernelError(LabkitError):
    """A kernel started in ``user``'s lab (by `labkit room bench`) did not run ``code``. ``problem``: "no answer"
    (its websocket broke; ``errors`` holds why), "failed" (``errors``: the kernel's "ename: evalue" lines, or
    its reply when it sent none)."""

    def __init__(self, *, user: str, code: str, problem: str, errors: Sequence[str] = ()) -> None:
        self.user, self.code, self.problem, self.errors = user, code, problem, list(errors)
        if problem == "no answer":
            remedy = "read its container's log"
        else:
            remedy = "Run it in that lab to read its traceback"
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        said_ = "; ".join(self.errors)
        if self.problem == "no answer":
            return f"The kernel of {self.user}'s lab stopped answering `{self.code}` ({said_})"
        return f"`{self.code}` failed in {self.user}'s lab: {said_}"


class HubError(LabkitError):
    """The room's hub, or a lab or the board behind its proxy, at ``url`` refused a request (``status_code``:
    401/403 when the token lacks a scope) or gave no usable answer (0): ``problem`` says which, in words;
    ``detail``: its own words."""

    def __init__(self, *, url: str, problem: str, status_code: int = 0, detail: str = "", remedy: str = "") -> None:
        self.url, self.status_code, self.problem, self.detail = url, status_code, problem, detail
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        text = f"{self.url} {self.problem}"
        if self.status_code and str(self.status_code) not in text:
            text += f" (HTTP {self.status_code})"
        return said(text, self.detail)


class BoardError(HubError):
    """The teacher's board at ``url`` did not give its table: ``status_code`` 401/403 (the token is not the
    teacher's), another status, or 0 (no answer)."""


class SwarmNodeError(LabkitError):
    """A room's swarm node named by the teacher (``node``: as given) cannot be used for what was asked:
    ``problem`` "unknown" (no node of the swarm has that host name, address or id; ``known``: the nodes, as
    `room status` prints them), "still up" (its participants' labs come back with it), "not a usable worker",
    or "no other worker" (no ready, active worker to move its participants to)."""

    def __init__(self, *, node: str, problem: str, known: Sequence[str] = (), remedy: str = "") -> None:
        self.node, self.problem, self.known = node, problem, list(known)
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        return mention(f"swarm node {self.node!r}: {self.problem}", "the swarm's nodes: ", self.known)


class RehomeError(LabkitError):
    """`labkit room rehome` moved some of node ``node``'s participants but not all: ``done``, what was done (one
    line each), ``failed``, one line per participant left behind or moved without their notebooks."""

    def __init__(self, *, node: str, done: Sequence[str] = (), failed: Sequence[str] = (), remedy: str = "") -> None:
        self.node, self.done, self.failed = node, list(done), list(failed)
        super().__init__(
            remedy=remedy
            or "read the hub's log (room/hub.log) for those named, fix what stopped them, and rehome them again"
        )

    def _headline(self) -> str:
        lines = "\n".join(f"  {line}" for line in [*self.done, *self.failed])
        return f"Not every participant of node {self.node} was moved:\n{lines}"


class PythonEnvError(LabkitError):
    """An execution environment for Python models could not be made. ``problem``: "python" (``wanted`` is
    a Python that no stub of ``runtime`` has; those it has are ``available``), "version" (``wanted`` is not
    a MAJOR.MINOR version), "unknown stub" (labkit does not know which Python the stub of ``runtime``, an
    image, embeds), "interpreter" (no Python ``wanted`` on this machine), "pip" (pip could not install
    ``packages``, or those of the requirements file ``path``; ``output`` is its last lines), "exists"
    (``path`` is there already and replacing it was not asked), "requirements" (the requirements file
    ``path`` cannot be read), "runtime" (a ``runtime`` labkit does not know). ``model``: the model whose
    requirements.txt it was, if any; ``detail``: the system's words, or where labkit looked."""

    _SAID = {
        "python": "No stub of {runtime} embeds Python {wanted} (they embed: {available})",
        "version": "{wanted!r} is not a Python version",
        "unknown stub": "labkit does not know which Python the stub of {runtime} embeds",
        "interpreter": "No Python {wanted} on this machine",
        "pip": "pip could not install {installing}",
        "exists": "{path} exists already, and replacing it was not asked",
        "requirements": "Cannot read the requirements file {path}",
        "runtime": "labkit knows no runtime {runtime!r}",
    }

    def __init__(
        self,
        *,
        problem: str,
        wanted: str = "",
        available: Sequence[str] = (),
        runtime: str = "",
        path: str = "",
        packages: Sequence[str] = (),
        output: str = "",
        model: str = "",
        detail: str = "",
        remedy: str = "",
    ) -> None:
        self.problem, self.wanted, self.available, self.runtime = problem, wanted, list(available), runtime
        self.path, self.packages, self.output, self.model, self.detail = path, list(packages), output, model, detail
        super().__init__(remedy=remedy)

    def _headline(self) -> str:
        installing = " ".join(self.packages) or (f"the packages of {self.path}" if self.path else "the packages")
        fields = dict(vars(self), available=_listed(self.available), installing=installing)
        text = self._SAID.get(self.problem, "The environment could not be made ({problem})").format(**fields)
        for label, value in (("", self.path), ("wanted: Python ", self.wanted), ("runtime: ", self.runtime)):
            text = mention(text, label, value)
        text = mention(text, "available: ", self.available)
        text = mention(text, "packages: ", " ".join(self.packages))
        if self.model:
            text += f" (for model {self.model!r})"
        return said(text, self.detail)

    def _blocks(self) -> list[tuple[str, str]]:
        return [("pip said", self.output)]
