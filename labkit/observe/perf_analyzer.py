"""perf_analyzer 23.12 as labkit's measuring instrument: a sweep over concurrency or request rate.

    sweep = labkit.perf(lab, "add_sub", concurrency=[1, 2, 4, 8])
    sweep              # the table: throughput, p50/p90/p95/p99, and the server's queue/compute split
    sweep.plot()       # throughput against p95 latency across the sweep

Each step is one perf_analyzer run (so progress shows per step) that writes its CSV report; the
table is read from that report. A step whose windows do not agree (a busy machine) is measured again
with windows twice as long; if they still disagree, it is measured once more accepting any spread and
kept marked ``stable=False`` (a ``*`` in the table): one restless step never fails the sweep.
perf_analyzer makes the inputs itself from the model's metadata
(random values); an input with a variable dimension (-1) needs its size in ``shapes``. Failures are
told apart by perf_analyzer's exit status and the server's state, never by its words.
"""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ..errors import ModelNotFoundError, OptionError, PerfAnalyzerError, UnstableMeasurementError
from ..plumbing.transport import Transport
from ..server.base import TritonServer
from . import perf_dist
from .plots import Picture

# perf_analyzer's exit statuses (perf_analyzer/constants.h, 23.12)
_UNSTABLE = 2
_BAD_OPTION = 3
#: A stability percentage that any measurement meets: the last try of an unstable step.
_ANY_SPREAD = 1_000_000
_COLUMNS = {  # our field -> its CSV column (µs, or inferences per second)
    "throughput": "Inferences/Second",
    "p50_us": "p50 latency",
    "p90_us": "p90 latency",
    "p95_us": "p95 latency",
    "p99_us": "p99 latency",
    "client_send_us": "Client Send",
    "network_us": "Network+Server Send/Recv",
    "queue_us": "Server Queue",
    "compute_input_us": "Server Compute Input",
    "compute_infer_us": "Server Compute Infer",
    "compute_output_us": "Server Compute Output",
    "client_recv_us": "Client Recv",
}
_MODES = {
    "concurrency": ("--concurrency-range", "Concurrency"),
    "request_rate": ("--request-rate-range", "Request Rate"),
}


@dataclass(frozen=True)
class PerfStep:
    """One point of a sweep, as perf_analyzer reported it (times in µs, per request)."""

    mode: str  # "concurrency" or "request_rate"
    value: float  # the concurrency, or the requests per second asked for
    throughput: float  # inferences per second
    p50_us: float
    p90_us: float
    p95_us: float
    p99_us: float
    client_send_us: float
    network_us: float  # network and the server's own HTTP/gRPC handling
    queue_us: float
    compute_input_us: float
    compute_infer_us: float
    compute_output_us: float
    client_recv_us: float
    stable: bool = True  # False: its windows disagreed beyond stability_percent, even twice as long
    measurement_ms: int = 0  # the window length of the run kept

    @property
    def label(self) -> str:
        mark = "" if self.stable else "*"
        return (f"c{self.value:g}" if self.mode == "concurrency" else f"{self.value:g}/s") + mark


@dataclass
class PerfSweep:
    """What a sweep measured: one PerfStep per concurrency (or request rate)."""

    model: str
    protocol: str
    steps: list[PerfStep]
    distribution: str = "constant"  # request-rate sweeps: how arrivals are spaced
    #: perf_analyzer's own command line for each step, as a person would type it (``perf_analyzer`` on PATH;
    #: ``labkit setup`` prints where labkit keeps the 23.12 binary), without the report file labkit adds
    commands: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "protocol": self.protocol,
            "distribution": self.distribution,
            "steps": [asdict(s) for s in self.steps],
            "commands": self.commands,
        }

    def to_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    def table(self) -> str:
        head = (
            "step",
            "infer/s",
            "p50 ms",
            "p90 ms",
            "p95 ms",
            "p99 ms",
            "queue us",
            "input us",
            "infer us",
            "output us",
        )
        rows = [head] + [
            (
                s.label,
                f"{s.throughput:.0f}",
                *(f"{v / 1e3:.2f}" for v in (s.p50_us, s.p90_us, s.p95_us, s.p99_us)),
                *(f"{v:.0f}" for v in (s.queue_us, s.compute_input_us, s.compute_infer_us, s.compute_output_us)),
            )
            for s in self.steps
        ]
        table = "\n".join("".join(f"{cell:>10s}" for cell in row) for row in rows)
        if any(not s.stable for s in self.steps):
            table += (
                "\n* unstable: its measurement windows disagreed beyond the stability percentage, also "
                "twice as long (a busy machine?); the numbers are one run's, read them as rough."
            )
        return table

    def __repr__(self) -> str:
        return f"perf_analyzer sweep of {self.model!r} ({self.protocol}):\n{self.table()}"

    def plot(self) -> Picture:
        """Throughput against p95 latency, one point per step: where more load stops paying."""
        fig = Figure(figsize=(5, 3.4))
        fig.subplots_adjust(left=0.16, right=0.95, bottom=0.16, top=0.88)
        ax = fig.subplots()
        x = [s.p95_us / 1e3 for s in self.steps]
        y = [s.throughput for s in self.steps]
        ax.plot(x, y, marker="o", color="#4c72b0")
        for s, xi, yi in zip(self.steps, x, y):
            ax.annotate(s.label, (xi, yi), textcoords="offset points", xytext=(4, -10), fontsize="small")
        ax.set_xlabel("p95 latency (ms)")
        ax.set_ylabel("inferences / s")
        ax.set_ylim(0, max(y, default=1) * 1.15)
        ax.set_xlim(0, max(x, default=1) * 1.2)
        ax.set_title(f"{self.model} (perf_analyzer)", fontsize="medium")
        return Picture(fig, f"{self.model} throughput vs p95 latency")


def _shape_args(server: TritonServer, model: str, shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """--shape for every input with a variable dimension; an error naming those without a size."""
    config = server.model_config(model)
    batching = int(config.get("max_batch_size", 0)) > 0
    args, missing = [], []
    for spec in config.get("input", []):
        name, dims = spec["name"], [int(d) for d in spec.get("dims", [])]
        if name in shapes:
            args += ["--shape", f"{name}:{','.join(str(int(d)) for d in shapes[name])}"]
        elif any(d < 0 for d in dims):
            missing.append(f"{name} {dims}")
    if missing:
        example = ", ".join(f"{m.split()[0]!r}: [...]" for m in missing)
        raise PerfAnalyzerError(
            model=model,
            problem=(
                f"needs a size for every -1 dimension of the inputs: {'; '.join(missing)}"
                f"{' (without the batch dimension)' if batching else ''}"
            ),
            remedy=f"Pass shapes={{{example}}}",
        )
    return args


def _not_loaded(server: TritonServer, model: str) -> ModelNotFoundError | None:
    loaded = server.loaded_models()
    return None if model in loaded else ModelNotFoundError(model=model, loaded=loaded)


def _failure(server: TritonServer, model: str, code: int, output: str, what: str) -> Exception:
    if code == _UNSTABLE:
        return UnstableMeasurementError(
            model=model,
            at=what,
            problem="could not get a stable measurement: the machine is busy, or the windows are short for this load",
            remedy="Raise measurement_ms or stability_percent, or measure again when the machine is quieter",
            exit_code=code,
            output=output,
        )
    if not server.alive:
        return server.health.exited_error(f"perf_analyzer on {model!r} failed")
    missing = _not_loaded(server, model)
    if missing is not None:
        return ModelNotFoundError(model=model, loaded=missing.loaded, output=output)
    hint = "its options were refused" if code == _BAD_OPTION else f"it exited with status {code}"
    return PerfAnalyzerError(
        model=model,
        at=what,
        problem=f"failed: {hint}",
        exit_code=code,
        output=output,
        remedy="read what perf_analyzer said below",
    )


def check_steps(concurrency: Sequence[int] | None = None, request_rate: Sequence[float] | None = None) -> None:
    """PerfAnalyzerError (exit_code None: nothing was started) for a step perf_analyzer would refuse
    with only its usage text: a concurrency below 1 or not whole, a request rate not above 0."""
    bad: list[float] = [c for c in concurrency or [] if c < 1 or int(c) != c]
    if bad:
        raise PerfAnalyzerError(
            problem=f"was not started: a concurrency is a whole number of requests in flight, at least 1, not {', '.join(f'{c:g}' for c in bad)}",
            remedy="e.g. concurrency=[1, 2, 4, 8]",
            exit_code=None,
        )
    bad = [r for r in request_rate or [] if not r > 0]
    if bad:
        raise PerfAnalyzerError(
            problem=f"was not started: a request rate is requests per second above 0, not {', '.join(f'{r:g}' for r in bad)}",
            remedy="e.g. request_rate=[100, 200]",
            exit_code=None,
        )


def _read_step(report: Path, mode: str) -> PerfStep:
    with open(report, newline="") as f:
        row = next(csv.DictReader(f))
    value = float(row[_MODES[mode][1]])

    def measured(field: str) -> float:
        return float(row[_COLUMNS[field]])

    return PerfStep(
        mode,
        value,
        throughput=measured("throughput"),
        p50_us=measured("p50_us"),
        p90_us=measured("p90_us"),
        p95_us=measured("p95_us"),
        p99_us=measured("p99_us"),
        client_send_us=measured("client_send_us"),
        network_us=measured("network_us"),
        queue_us=measured("queue_us"),
        compute_input_us=measured("compute_input_us"),
        compute_infer_us=measured("compute_infer_us"),
        compute_output_us=measured("compute_output_us"),
        client_recv_us=measured("client_recv_us"),
    )


@dataclass(frozen=True)
class PerfOptions:
    """How ``perf`` measures. ``concurrency`` (default 1, 2, 4, 8) or ``request_rate`` (requests per
    second, arrivals spaced by ``distribution``: "constant" or "poisson"), one of them; ``protocol``
    "http" or "grpc"; ``batch`` rows per request; ``shapes`` the size of each input with a variable
    dimension. A step's windows last ``measurement_ms``; a step is kept when the last three agree
    within ``stability_percent``, within ``max_trials`` windows, else it is measured again (see the
    module's docstring). ``timeout_s`` bounds one perf_analyzer run; ``extra_args`` go to each run as
    they are; ``progress`` prints each step."""

    concurrency: Sequence[int] | None = None
    request_rate: Sequence[float] | None = None
    distribution: str = "constant"
    protocol: str = "http"
    batch: int = 1
    shapes: Mapping[str, Sequence[int]] | None = None
    measurement_ms: int = 1000
    stability_percent: float = 10
    max_trials: int = 10
    timeout_s: float = 300
    extra_args: Sequence[str] = ()
    progress: bool = True

    @property
    def mode(self) -> str:
        """ "request_rate" or "concurrency": what the sweep steps through."""
        return "request_rate" if self.request_rate is not None else "concurrency"

    @property
    def values(self) -> list[float]:
        """The sweep's steps: the request rates, or the concurrencies (default 1, 2, 4, 8)."""
        if self.request_rate is not None:
            return list(self.request_rate)
        return list(self.concurrency or [1, 2, 4, 8])


def perf(server: TritonServer, model: str, options: PerfOptions | None = None, **fields: Any) -> PerfSweep:
    """Measure ``model`` with perf_analyzer 23.12 at each concurrency or request rate of ``options``
    (a PerfOptions; keyword ``fields`` replace its fields: ``perf(lab, "add_sub", concurrency=[1, 2])``).
    A step whose windows disagree is measured again (see the module's docstring) and kept with
    ``stable=False``."""
    opts = replace(options or PerfOptions(), **fields)
    if opts.concurrency is not None and opts.request_rate is not None:
        raise OptionError(
            option="concurrency and request_rate",
            value=(opts.concurrency, opts.request_rate),
            valid="one of them, not both",
        )
    if opts.distribution not in ("constant", "poisson"):
        raise OptionError(option="distribution", value=opts.distribution, valid="'constant' or 'poisson'")
    transport = Transport.of(opts.protocol)
    check_steps(opts.concurrency, opts.request_rate)
    missing = _not_loaded(server, model)
    if missing is not None:
        raise missing
    tool = perf_dist.locate()
    base = _base_argv(server, model, opts, str(tool.binary), transport)
    commands = [shlex.join(["perf_analyzer", *base[1:], *_window_args(opts, value)]) for value in opts.values]
    if opts.progress:
        print(
            f"perf_analyzer's own command, step 1 of {len(opts.values)} (the others change {_MODES[opts.mode][0]}):\n"
            f"  {commands[0]}",
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="labkit-perf-") as tmp:
        steps = [
            _measure_step(server, model, opts, base, tool.env(), Path(tmp) / f"step{n}", n, value)
            for n, value in enumerate(opts.values, 1)
        ]
    distribution = opts.distribution if opts.mode == "request_rate" else "constant"
    return PerfSweep(model, transport.value, steps, distribution, commands)


def _base_argv(server: TritonServer, model: str, opts: PerfOptions, binary: str, transport: Transport) -> list[str]:
    """perf_analyzer's command line without a step's window, stability and load."""
    base = [
        binary,
        "-m",
        model,
        "-i",
        transport.value,
        "-u",
        transport.url(server.endpoints),
        "-b",
        str(opts.batch),
        "-r",
        str(opts.max_trials),
        "--percentile",
        "95",
        "--verbose-csv",
        *_shape_args(server, model, opts.shapes or {}),
        *opts.extra_args,
    ]
    if opts.mode == "request_rate":
        base += ["--request-distribution", opts.distribution]
    return base


def _window_args(
    opts: PerfOptions, value: float, window_ms: int | None = None, percent: float | None = None
) -> list[str]:
    """A step's window (``-p``), stability (``-s``) and load (concurrency or request rate)."""
    window_ms = opts.measurement_ms if window_ms is None else window_ms
    percent = opts.stability_percent if percent is None else percent
    return ["-p", str(window_ms), "-s", f"{percent:g}", _MODES[opts.mode][0], f"{value:g}"]


def _measure_step(
    server: TritonServer,
    model: str,
    opts: PerfOptions,
    base: list[str],
    env: dict[str, str],
    reports: Path,
    n: int,
    value: float,
) -> PerfStep:
    """Step ``n`` of the sweep at ``value``: as asked; then windows twice as long; then any spread
    accepted, the step marked unstable. Its CSV reports are ``reports.<attempt>.csv``."""
    what = f"{opts.mode.replace('_', ' ')} {value:g}"
    if opts.progress:
        print(f"perf_analyzer {model} [{n}/{len(opts.values)}] {what} ...", end="", flush=True)
    tries = [
        (opts.measurement_ms, opts.stability_percent),
        (2 * opts.measurement_ms, opts.stability_percent),
        (2 * opts.measurement_ms, _ANY_SPREAD),
    ]
    for attempt, (window_ms, percent) in enumerate(tries):
        report = reports.with_name(f"{reports.name}.{attempt}.csv")
        args = [*_window_args(opts, value, window_ms, percent), "-f", str(report)]
        try:
            proc = subprocess.run([*base, *args], env=env, capture_output=True, text=True, timeout=opts.timeout_s)
        except subprocess.TimeoutExpired:
            raise PerfAnalyzerError(
                model=model,
                at=what,
                problem=f"did not finish within {opts.timeout_s:g} s (timeout_s)",
                remedy="is the model stuck? Try labkit.infer on it",
                exit_code=None,
            ) from None
        if proc.returncode == _UNSTABLE and attempt < len(tries) - 1 and server.alive:
            continue
        break
    stable = percent == opts.stability_percent
    if opts.progress:
        print(
            (" done" if stable else " unstable (kept, marked *)") if proc.returncode == 0 else " failed",
            flush=True,
        )
    if proc.returncode != 0 or not report.exists():
        output = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise _failure(server, model, proc.returncode, output, what)
    return replace(_read_step(report, opts.mode), stable=stable, measurement_ms=window_ms)
