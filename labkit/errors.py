"""The one exception hierarchy of labkit. Every message says what to do next; every class also
carries what happened as fields (``model``, ``reason``, ``compiler_output``, ...), so code that
handles an error reads its fields, never its text.

    LabkitError
    ├── SetupError                  .missing .reason: the machine lacks something (a file, a library, an engine)
    │   └── GpuUnavailableError     .wanted: a call needs a GPU (or CUDA) that this machine does not have
    ├── EngineError                 .status_code: the Docker engine refused an operation
    ├── ServerError                 .log_tail .exit_summary
    │   ├── ServerStartError
    │   │   ├── PortTakenError      .port .service .host: a port asked for is held by another process
    │   │   │   └── RoomPortTakenError     the port of `labkit room up`
    │   │   └── BackendClashError   .backend .directory: a user backend has the name of one labkit serves
    │   ├── ServerNotRunningError  .crash .doing .stopped
    │   └── WaitTimeoutError        .what .timeout_s: the server never reached a state labkit waited for
    ├── RepositoryError             .missing .refused
    │   ├── InvalidNameError        .name .what (also a ValueError)
    │   ├── RepositoryWriteError    .path .errno: the file system refused a write
    │   └── ConfigError             .field .value .valid .lacks .source
    ├── ModelLoadError              .model .reason .serving
    │   ├── LoadTimeoutError        .timeout_s .stack .location .ended .interrupted
    │   ├── EnsembleStepError       .step .step_model .problem .tensor .available .refused_by
    │   └── MetricKindError         .metric .kind .registered_kind .registered_by
    ├── InferenceError              .model .reason .stack
    │   ├── ModelNotFoundError      .loaded
    │   ├── RequestError            .expected .sent .differs
    │   │   └── InputSizeError      .input .needed .carried .unit: refused before sending
    │   ├── OutputNameError         .missing .outputs .produced
    │   ├── SequenceError           .sequence_id .problem: a stateful model's request without a sequence, or of several rows
    │   ├── RequestTimeoutError     .limit_s .stack .restart_needed
    │   │   └── RequestInterruptedError   .waited_s
    │   └── AnswerMismatchError
    ├── BuildError                  .backend .compiler_output .missing_exports .unavailable
    ├── PerfAnalyzerError           .exit_code .output: perf_analyzer failed
    │   └── UnstableMeasurementError
    ├── TraceError                  Triton's request traces could not be recorded or read
    ├── UnknownExerciseError        .exercise .notebook .known: a cell's exercise tag names no exercise
    ├── RoomSettingsError           .setting .value: a room setting the hub, the chart or KubeSpawner refuses (also a ValueError)
    └── UnknownProtocolError        .protocol .known: neither "http" nor "grpc" (also a ValueError)
"""

from __future__ import annotations

from collections.abc import Sequence


class LabkitError(Exception):
    """Base class of every error labkit raises."""


class SetupError(LabkitError):
    """The machine or environment lacks something Triton needs (files, a Python, a library).
    ``missing``: what is missing (an image name, a file, "Docker engine"), when known; ``reason``: why,
    in a few fixed words ("pull failed", "invalid image name", "not pulled", "unreachable", ...)."""

    def __init__(self, message: str, *, missing: str = "", reason: str = "") -> None:
        self.missing = missing
        self.reason = reason
        super().__init__(message)


class GpuUnavailableError(SetupError):
    """``wanted`` (a KIND_GPU model, CUDA shared memory, a CUDA build's kernel) needs a GPU or CUDA
    that this machine lacks; ``reason`` says what was seen ("no /dev/nvidia0 and no nvidia-smi", ...)."""

    def __init__(self, message: str, *, missing: str = "GPU", reason: str = "", wanted: str = "") -> None:
        self.wanted = wanted
        super().__init__(message, missing=missing, reason=reason)


class EngineError(LabkitError):
    """The Docker engine refused or failed an operation; ``status_code`` is its HTTP status (0 if none)."""

    def __init__(self, message: str, *, status_code: int = 0) -> None:
        self.status_code = status_code
        super().__init__(message)


class ServerError(LabkitError):
    """The Triton server could not start, or stopped working. ``log_tail``: its last log lines;
    ``exit_summary``: how Triton ended ("exit code 137", "killed by signal 9"), when it did and that is known."""

    def __init__(self, message: str, log_tail: str = "", *, exit_summary: str = "") -> None:
        self.log_tail = log_tail
        self.exit_summary = exit_summary
        if log_tail:
            message = f"{message}\n--- last server log lines ---\n{log_tail}"
        super().__init__(message)


class ServerStartError(ServerError):
    """Triton exited or did not become ready during start-up."""


class PortTakenError(ServerStartError):
    """Triton was asked to listen on ``port`` (its ``service``: "http", "grpc" or "metrics") on ``host``,
    and another process holds it; nothing was started, and no other port was tried."""

    def __init__(self, *, port: int, service: str, host: str = "127.0.0.1") -> None:
        self.port = port
        self.service = service
        self.host = host
        super().__init__(
            f"Port {port} ({service}) on {host} is taken by another process (another tritonserver or labkit "
            f"serve?). Stop that process, choose another port (--{service}-port, or {service}_port= in "
            f"labkit.start()), or let labkit pick free ports (--any-ports, or {service}_port=0).")


class RoomPortTakenError(PortTakenError):
    """`labkit room up` was asked to serve the room on ``port``, and another process holds it."""

    def __init__(self, *, port: int, host: str = "0.0.0.0") -> None:
        ServerStartError.__init__(self, f"Port {port} on {host} is taken by another process (another room's hub?). "
                                  f"Stop it (`labkit room down --dir DIR`), or choose another port: "
                                  f"`labkit room up --port N`.")
        self.port, self.service, self.host = port, "room", host


class BackendClashError(ServerStartError):
    """The backend folder ``directory`` holds a backend named ``backend``, and labkit's own backend folder
    already has one of that name (``python``: labkit's Python backend; or a backend written from a
    notebook); nothing was started."""

    def __init__(self, *, backend: str, directory: str) -> None:
        self.backend = backend
        self.directory = directory
        what = "labkit's own Python backend" if backend == "python" else "a backend labkit already serves"
        super().__init__(
            f"{directory}/{backend} has the name of {what}, and Triton takes one backend per name. Serve a "
            f"folder without {backend}/ (Triton's python backend comes with labkit), or rename your backend.")


class ServerNotRunningError(ServerError):
    """An operation needs a running server, and there is none (stopped, or died). ``crash``: where a
    C++ backend crashed it (signal or exception, and the cell's source lines), when one did; else empty.
    ``doing``: what failed because of it; ``stopped``: the server was stopped, not crashed."""

    def __init__(self, message: str, log_tail: str = "", *, crash: str = "", exit_summary: str = "",
                 doing: str = "", stopped: bool = False) -> None:
        self.crash = crash
        self.doing = doing  # what failed because the server is gone, e.g. "The request to 'm' failed"
        self.stopped = stopped  # the server was stopped on purpose (not a crash)
        super().__init__(message, log_tail, exit_summary=exit_summary)


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

    def __init__(self, message: str, *, field: str = "", value: str = "", valid: Sequence[str] = (),
                 lacks: Sequence[str] = (), source: str = "") -> None:
        self.field = field
        self.value = value
        self.valid = list(valid)
        self.lacks = list(lacks)
        self.source = source
        super().__init__(message)


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

    def __init__(self, message: str, *, model: str, timeout_s: float, stack: str = "", location: str = "",
                 ended: bool = False, interrupted: bool = False, reason: str = "") -> None:
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

    def __init__(self, message: str, *, model: str, step: int, step_model: str, problem: str, tensor: str = "",
                 available: Sequence[str] = (), refused_by: str = "labkit", reason: str = "") -> None:
        self.step, self.step_model, self.problem, self.tensor = step, step_model, problem, tensor
        self.available, self.refused_by = list(available), refused_by
        super().__init__(message, model=model, reason=reason)


class MetricKindError(ModelLoadError):
    """``model`` defines the metric family ``metric`` as a ``kind`` ("counter" or "gauge"), and Triton
    already has a family of that name of ``registered_kind`` (defined by ``registered_by``, when
    labkit knows which loaded model did; Triton 23.12 keeps a family until it exits). labkit refused
    the load before Triton saw it."""

    def __init__(self, message: str, *, model: str, metric: str, kind: str, registered_kind: str,
                 registered_by: str = "") -> None:
        self.metric, self.kind, self.registered_kind, self.registered_by = metric, kind, registered_kind, registered_by
        super().__init__(message, model=model)


class InferenceError(LabkitError):
    """A request to ``model`` failed. ``reason``: Triton's (or the backend's) own words for the
    failure, or why labkit refused, when there are such words; else empty."""

    def __init__(self, message: str, *, model: str = "", reason: str = "", stack: str = "") -> None:
        self.model = model
        self.reason = reason
        self.stack = stack  # where the model's code is, when labkit read it
        super().__init__(message)


class ModelNotFoundError(InferenceError):
    """The request named a model that is not loaded; ``loaded`` lists those that are. Without a
    message, it says which are loaded and how to load this one."""

    def __init__(self, message: str = "", *, model: str, loaded: Sequence[str] = ()) -> None:
        self.loaded = list(loaded)
        super().__init__(message or f"Model {model!r} is not loaded (loaded: {', '.join(self.loaded) or 'none'}). "
                                    f"Load it with server.load({model!r}).", model=model)


class RequestError(InferenceError):
    """Triton rejected the request's inputs (name, datatype or shape).

    ``reason`` is Triton's words; ``expected`` and ``sent`` describe the model's inputs and the request's;
    ``differs`` lists what differs, one item per input ("INPUT0 is INT32, the model takes FP32").
    """

    def __init__(self, message: str, *, model: str, reason: str = "", expected: str = "", sent: str = "",
                 differs: Sequence[str] = ()) -> None:
        self.expected = expected
        self.sent = sent
        self.differs = list(differs)
        super().__init__(message, model=model, reason=reason)


class InputSizeError(RequestError):
    """An input's data does not fill the shape it declares (``needed`` vs ``carried`` ``unit``: bytes,
    or strings for BYTES); refused before it was sent, since Triton 23.12 passes such a request to the
    backend, and a Python stub asked for more bytes than came can die of it."""

    def __init__(self, message: str, *, model: str, input: str, needed: int, carried: int, unit: str) -> None:
        self.input = input
        self.needed = needed
        self.carried = carried
        self.unit = unit
        super().__init__(message, model=model, reason="", expected=f"{input}: {needed} {unit}",
                         sent=f"{input}: {carried} {unit}")


class OutputNameError(InferenceError):
    """An output was asked for, or declared in the config, and the answer lacks it: a misspelled name in
    the request or in the model's ``pb_utils.Tensor(NAME, ...)``. ``missing``: those names; ``outputs``:
    the model's outputs by its config; ``produced``: what the answer carried."""

    def __init__(self, message: str, *, model: str, missing: Sequence[str], outputs: Sequence[str],
                 produced: Sequence[str] = ()) -> None:
        self.missing = list(missing)
        self.outputs = list(outputs)
        self.produced = list(produced)
        super().__init__(message, model=model)


class RequestTimeoutError(InferenceError):
    """A request to ``model`` got no answer within ``limit_s`` seconds. ``stack`` is where the model
    was stuck (its code's frames, innermost last), when labkit could read it; else empty.
    ``restart_needed``: only a restart ends it (a thread inside Triton, a C++ backend); else
    ``lab.unstick(model)`` can. ``reason``: why the wait ended without an answer beyond the time
    limit, when there is more to say (a stream that sent no final flag)."""

    def __init__(self, message: str, *, model: str, limit_s: float, stack: str = "",
                 restart_needed: bool = False, reason: str = "") -> None:
        self.limit_s = limit_s
        self.restart_needed = restart_needed
        super().__init__(message, model=model, reason=reason, stack=stack)


class RequestInterruptedError(RequestTimeoutError):
    """A kernel interrupt (Ctrl-C, the notebook's stop button) ended the wait for ``model`` after
    ``waited_s`` seconds, before the time limit; ``stack`` is where the model was at that moment."""

    def __init__(self, message: str, *, model: str, limit_s: float, waited_s: float, stack: str = "",
                 restart_needed: bool = False) -> None:
        self.waited_s = waited_s
        super().__init__(message, model=model, limit_s=limit_s, stack=stack, restart_needed=restart_needed)


class SequenceError(InferenceError):
    """Triton refused a request to a model with sequence batching for what the sequence batcher needs.
    ``problem``: "no-sequence-id" (the request carried no sequence id) or "rows" (it carried more than
    one batch row: each request is one step of its sequence); ``sequence_id`` as sent (0: none)."""

    def __init__(self, message: str, *, model: str, sequence_id: int | str = 0, problem: str, reason: str = "") -> None:
        self.sequence_id, self.problem = sequence_id, problem
        super().__init__(message, model=model, reason=reason)


class AnswerMismatchError(InferenceError):
    """A model answered, but not with the expected values."""


class BuildError(LabkitError):
    """A C++ backend did not compile, or the library lacks what Triton requires; nothing was loaded.

    ``compiler_output`` holds the compiler's messages (line numbers of the user's source), if any;
    ``missing_exports`` the entry points Triton requires that the library does not export;
    ``unavailable`` the Triton functions it calls that the 23.12 server does not have; ``undefined``
    the functions it calls that nothing defines (as the linker names them).
    """

    def __init__(self, message: str, *, backend: str = "", compiler_output: str = "",
                 missing_exports: Sequence[str] = (), unavailable: Sequence[str] = (),
                 undefined: Sequence[str] = ()) -> None:
        self.backend = backend
        self.undefined = list(undefined)
        self.compiler_output = compiler_output
        self.missing_exports = list(missing_exports)
        self.unavailable = list(unavailable)
        super().__init__(message)


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
        super().__init__(f"{notebook}: a cell is tagged 'exercise:{exercise}', and there is no exercise {exercise!r} "
                         f"(nothing was changed). Fix the cell's tag; the exercises are: {', '.join(self.known)}.")


class WaitTimeoutError(ServerError):
    """The server did not reach a state labkit waited for (``what``) within ``timeout_s``."""

    def __init__(self, *, what: str, timeout_s: float, log_tail: str = "") -> None:
        self.what, self.timeout_s = what, timeout_s
        super().__init__(f"Waited {timeout_s:g} s for {what}; it did not happen. Read server.logs.tail(), "
                         f"or wait longer.", log_tail)


class UnknownProtocolError(LabkitError, ValueError):
    """A ``protocol=`` that labkit does not speak (``protocol`` is the value given, ``known`` the ones
    it does: "http" and "grpc"). Also a ValueError, as a bad argument."""

    def __init__(self, *, protocol: object, known: Sequence[str]) -> None:
        self.protocol, self.known = protocol, list(known)
        super().__init__(f"protocol must be {' or '.join(map(repr, self.known))}, not {protocol!r}.")


class RoomSettingsError(LabkitError, ValueError):
    """A workshop room's ``setting`` (a RoomSettings field or option, e.g. "memory") holds a ``value`` that
    the hub, the Zero to JupyterHub chart or KubeSpawner would refuse; nothing was started or written.
    Also a ValueError, as a bad argument."""

    def __init__(self, message: str, *, setting: str, value: str) -> None:
        self.setting = setting
        self.value = value
        super().__init__(message)
