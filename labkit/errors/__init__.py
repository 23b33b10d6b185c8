"""The one exception hierarchy of labkit: import every class from here (``labkit.errors``); the
submodules only group them. Every class takes its fields as keywords and composes its message from
them (``str(error)``: what happened and why, then ``remedy``, what to do next, then a tool's own long
words under ``--- label ---`` lines), so code that handles an error reads its fields, never its text.
Every class has ``remedy``; no bare LabkitError is raised (tests/unit/test_errors_from_fields.py).

    LabkitError
    ├── SetupError                  .missing .reason .needed_by .detail: the machine lacks something (a file, a library, an engine)
    │   └── GpuUnavailableError     .wanted: a call needs a GPU (or CUDA) that this machine does not have
    ├── EngineError                 .status_code .doing .detail: the Docker engine refused an operation
    ├── ServerError                 .doing .reason .detail .log_tail .exit_summary
    │   ├── ServerStartError
    │   │   ├── ContainerStartError .status_code .image: Docker could not create or start Triton's container
    │   │   ├── PortTakenError      .port .service .host: a port asked for is held by another process
    │   │   └── BackendClashError   .backend .directory: a user backend has the name of one labkit serves
    │   ├── ServerNotRunningError  .crash .doing .stopped
    │   └── WaitTimeoutError        .what .timeout_s: the server never reached a state labkit waited for
    ├── RepositoryError             .subject .problem .missing .refused
    │   ├── InvalidNameError        .name .what .problem (also a ValueError)
    │   ├── RepositoryWriteError    .path .errno .detail: the file system refused a write
    │   ├── RepositoryNotFoundError .path: a command's model repository folder is not there
    │   └── ConfigError             .field .value .valid .lacks .source .problem
    │       └── MissingConfigError  .model .remedy: a model without config.pbtxt (.lacks ["config.pbtxt"], .source its path)
    ├── ModelLoadError              .model .happened .reason .detail .serving
    │   ├── LoadTimeoutError        .timeout_s .stack .location .ended .interrupted .waited_s
    │   ├── EnsembleStepError       .step .step_model .problem .tensor .tensors .available .refused_by
    │   ├── MetricKindError         .metric .kind .registered_kind .registered_by
    │   ├── ExecutionEnvError       .environment .problem .found .needed: a model's environment refused before Triton
    │   └── MissingModuleError      .module .python .environment: model.py imports what its stub's Python lacks
    ├── InferenceError              .model .happened .reason .detail .stack
    │   ├── ModelNotFoundError      .loaded .output
    │   ├── RequestError            .expected .sent .differs .refused_by
    │   │   └── InputSizeError      .input .needed .carried .unit .declared: refused before sending
    │   ├── OutputNameError         .missing .outputs .produced .asked
    │   ├── SequenceError           .sequence_id .problem .rows: a stateful model's request without a sequence, or of several rows
    │   ├── SharedMemoryError       .needed_bytes .free_bytes .total_bytes .shm_size: /dev/shm cannot hold the request
    │   ├── RequestTimeoutError     .limit_s .stack .restart_needed
    │   │   └── RequestInterruptedError   .waited_s
    │   ├── RequestDroppedError     .needs: Triton released the request without an answer (its log says so)
    │   └── AnswerMismatchError     .answered .expected
    ├── BuildError                  .backend .problem .compiler_output .missing_exports .unavailable .file .line .command .flag
    ├── PythonEnvError              .problem .wanted .available .runtime .path .packages .output .model .detail: an environment not made
    ├── PerfAnalyzerError           .model .at .problem .exit_code .output: perf_analyzer failed
    │   └── UnstableMeasurementError
    ├── TraceError                  .model .problem .detail: Triton's request traces could not be recorded or read
    ├── UnknownExerciseError        .exercise .notebook .known: a cell's exercise tag names no exercise
    ├── CourseError                 .notebook .field .problem: a lesson lacks the metadata the day's plan reads
    ├── NotebookNotFoundError       .folder .name .known .matches: `labkit workshop` found no notebook to work on
    ├── LessonOutcomeError          .model .happened .expected .check: a lesson's demonstration went otherwise
    ├── AlreadyRanError             .what .remedy: an object that runs once (a dashboard) has run
    ├── OptionError                 .option .value .valid: an argument a labkit call cannot use (also a ValueError)
    ├── RoomSettingsError           .setting .value .problem: a room setting the hub, the chart or KubeSpawner refuses (also a ValueError)
    ├── SubmissionError             .user .notebook .problem .status_code .detail: a saved notebook not read for, or handed to, the grader
    ├── RoomFileError               .path .problem .detail: a room's folder, progress file or CSV not usable
    ├── LabKernelError              .user .code .problem .errors: a kernel in a participant's lab did not run code
    ├── SwarmNodeError              .node .problem .known: a swarm node the teacher named cannot be used (`room rehome`)
    ├── RehomeError                 .node .done .failed: `room rehome` moved some of a node's participants, not all
    ├── HubError                    .url .problem .status_code .detail: the room's hub (or a lab, the board) refused or did not answer
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
    RehomeError,
    RoomFileError,
    RoomSettingsError,
    SubmissionError,
    SwarmNodeError,
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
    "SwarmNodeError",
    "RehomeError",
    "RoomFileError",
    "LabKernelError",
    "HubError",
    "BoardError",
]
