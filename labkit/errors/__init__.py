"""The one exception hierarchy of labkit: import every class from here (``labkit.errors``); the
submodules only group them. Every message says what to do next; every class also carries what
happened as fields (``model``, ``reason``, ``compiler_output``, ...), so code that handles an error
reads its fields, never its text.

    LabkitError
    ├── SetupError                  .missing .reason: the machine lacks something (a file, a library, an engine)
    │   └── GpuUnavailableError     .wanted: a call needs a GPU (or CUDA) that this machine does not have
    ├── EngineError                 .status_code: the Docker engine refused an operation
    ├── ServerError                 .log_tail .exit_summary
    │   ├── ServerStartError
    │   │   ├── ContainerStartError .status_code: Docker could not create or start Triton's container
    │   │   ├── PortTakenError      .port .service .host: a port asked for is held by another process
    │   │   └── BackendClashError   .backend .directory: a user backend has the name of one labkit serves
    │   ├── ServerNotRunningError  .crash .doing .stopped
    │   └── WaitTimeoutError        .what .timeout_s: the server never reached a state labkit waited for
    ├── RepositoryError             .missing .refused
    │   ├── InvalidNameError        .name .what (also a ValueError)
    │   ├── RepositoryWriteError    .path .errno: the file system refused a write
    │   ├── RepositoryNotFoundError .path: a command's model repository folder is not there
    │   └── ConfigError             .field .value .valid .lacks .source
    │       └── MissingConfigError  .model .remedy: a model without config.pbtxt (.lacks ["config.pbtxt"], .source its path)
    ├── ModelLoadError              .model .reason .serving
    │   ├── LoadTimeoutError        .timeout_s .stack .location .ended .interrupted
    │   ├── EnsembleStepError       .step .step_model .problem .tensor .available .refused_by
    │   ├── MetricKindError         .metric .kind .registered_kind .registered_by
    │   ├── ExecutionEnvError       .environment .problem .found .needed: a model's environment refused before Triton
    │   └── MissingModuleError      .module .python .environment: model.py imports what its stub's Python lacks
    ├── InferenceError              .model .reason .stack
    │   ├── ModelNotFoundError      .loaded
    │   ├── RequestError            .expected .sent .differs
    │   │   └── InputSizeError      .input .needed .carried .unit: refused before sending
    │   ├── OutputNameError         .missing .outputs .produced
    │   ├── SequenceError           .sequence_id .problem: a stateful model's request without a sequence, or of several rows
    │   ├── SharedMemoryError       .needed_bytes .free_bytes .shm_size: /dev/shm cannot hold the request
    │   ├── RequestTimeoutError     .limit_s .stack .restart_needed
    │   │   └── RequestInterruptedError   .waited_s
    │   ├── RequestDroppedError     .needs: Triton released the request without an answer (its log says so)
    │   └── AnswerMismatchError
    ├── BuildError                  .backend .compiler_output .missing_exports .unavailable .file .line .command .flag
    ├── PythonEnvError              .problem .wanted .available .runtime .path .output .model: an environment not made
    ├── PerfAnalyzerError           .exit_code .output: perf_analyzer failed
    │   └── UnstableMeasurementError
    ├── TraceError                  Triton's request traces could not be recorded or read
    ├── UnknownExerciseError        .exercise .notebook .known: a cell's exercise tag names no exercise
    ├── CourseError                 .notebook .field .problem: a lesson lacks the metadata the day's plan reads
    ├── NotebookNotFoundError       .folder .name .known .matches: `labkit workshop` found no notebook to work on
    ├── LessonOutcomeError          .model .happened .expected .check: a lesson's demonstration went otherwise
    ├── AlreadyRanError             .what .remedy: an object that runs once (a dashboard) has run
    ├── OptionError                 .option .value .valid: an argument a labkit call cannot use (also a ValueError)
    ├── RoomSettingsError           .setting .value: a room setting the hub, the chart or KubeSpawner refuses (also a ValueError)
    ├── SubmissionError             .user .notebook .problem .status_code: a saved notebook not read for, or handed to, the grader
    ├── RoomFileError               .path .problem .detail: a room's folder, progress file or CSV not usable
    ├── LabKernelError              .user .code .problem .errors: a kernel in a participant's lab did not run code
    ├── HubError                    .url .status_code: the room's hub (or a lab, the board) refused or did not answer
    │   └── BoardError              the teacher's board did not give its table
    └── UnknownProtocolError        .protocol .known: neither "http" nor "grpc" (also a ValueError)
"""

from .models import (
    BuildError,
    ConfigError,
    EnsembleStepError,
    ExecutionEnvError,
    InvalidNameError,
    LoadTimeoutError,
    MetricKindError,
    MissingConfigError,
    MissingModuleError,
    ModelLoadError,
    RepositoryError,
    RepositoryNotFoundError,
    RepositoryWriteError,
)
from .requests import (
    AnswerMismatchError,
    InferenceError,
    InputSizeError,
    ModelNotFoundError,
    OutputNameError,
    RequestDroppedError,
    RequestError,
    RequestInterruptedError,
    RequestTimeoutError,
    SequenceError,
    SharedMemoryError,
)
from .root import EngineError, GpuUnavailableError, LabkitError, SetupError
from .server import (
    BackendClashError,
    ContainerStartError,
    PortTakenError,
    ServerError,
    ServerNotRunningError,
    ServerStartError,
    WaitTimeoutError,
)
from .tools import (
    AlreadyRanError,
    BoardError,
    CourseError,
    HubError,
    LabKernelError,
    LessonOutcomeError,
    NotebookNotFoundError,
    OptionError,
    PerfAnalyzerError,
    PythonEnvError,
    RoomFileError,
    RoomSettingsError,
    SubmissionError,
    TraceError,
    UnknownExerciseError,
    UnknownProtocolError,
    UnstableMeasurementError,
)

__all__ = [
    "LabkitError",
    "SetupError",
    "GpuUnavailableError",
    "EngineError",
    "ServerError",
    "ServerStartError",
    "ContainerStartError",
    "PortTakenError",
    "BackendClashError",
    "ServerNotRunningError",
    "RepositoryError",
    "InvalidNameError",
    "RepositoryWriteError",
    "RepositoryNotFoundError",
    "ConfigError",
    "MissingConfigError",
    "ModelLoadError",
    "LoadTimeoutError",
    "EnsembleStepError",
    "MetricKindError",
    "ExecutionEnvError",
    "MissingModuleError",
    "InferenceError",
    "ModelNotFoundError",
    "RequestError",
    "InputSizeError",
    "OutputNameError",
    "RequestTimeoutError",
    "RequestInterruptedError",
    "RequestDroppedError",
    "SequenceError",
    "SharedMemoryError",
    "AnswerMismatchError",
    "BuildError",
    "PythonEnvError",
    "PerfAnalyzerError",
    "UnstableMeasurementError",
    "TraceError",
    "UnknownExerciseError",
    "CourseError",
    "NotebookNotFoundError",
    "LessonOutcomeError",
    "AlreadyRanError",
    "WaitTimeoutError",
    "UnknownProtocolError",
    "OptionError",
    "RoomSettingsError",
    "SubmissionError",
    "RoomFileError",
    "LabKernelError",
    "HubError",
    "BoardError",
]
