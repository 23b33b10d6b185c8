"""Lesson: ``pb_utils.Logger``, a Python model's lines in the server's own log, at every level.

``pb_utils.Logger.log_info / log_warn / log_error / log_verbose(message)``, or ``Logger.log(message,
level)`` with ``Logger.INFO``, ``WARNING``, ``ERROR`` or ``VERBOSE`` (python_backend README r23.12,
"Logging"). The stub hands each line to Triton, which writes it with its level's letter (I, W, E;
verbose lines are written as I) and the model.py line that logged it. Verbose lines appear only while
Triton's verbose level is 1 or more: ``--log-verbose=1`` on its command line (``labkit.start(log_verbose=1)``),
or at run time through the logging extension (``client.update_log_settings({"log_verbose_level": 1})``).

    lab = labkit.start(log_verbose=1)
    python_logging.setup(lab)
    print(python_logging.logged(lab, tag=1))
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...client.inference import infer
from ...errors import WaitTimeoutError
from ...plumbing.polling import wait_until
from ...repository import model_config
from ...server.base import TritonServer
from .outcome import Outcome

MODEL = "logger_levels"

SOURCE = '''"""logger_levels: one log line per level and per way of logging, each ending in the request's TAG."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        log = pb_utils.Logger
        for request in requests:
            tag = int(pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0])
            log.log_info(f"logger_levels: log_info {tag}")
            log.log_warn(f"logger_levels: log_warn {tag}")
            log.log_error(f"logger_levels: log_error {tag}")
            log.log_verbose(f"logger_levels: log_verbose {tag}")
            log.log(f"logger_levels: log INFO {tag}", log.INFO)
            log.log(f"logger_levels: log WARNING {tag}", log.WARNING)
            log.log(f"logger_levels: log ERROR {tag}", log.ERROR)
            log.log(f"logger_levels: log VERBOSE {tag}", log.VERBOSE)
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "TAG")]) for r in requests]
'''

#: Each way of logging, and the level Triton files its line under.
CALLS = {
    "log_info": "INFO",
    "log_warn": "WARNING",
    "log_error": "ERROR",
    "log_verbose": "VERBOSE",
    "log INFO": "INFO",
    "log WARNING": "WARNING",
    "log ERROR": "ERROR",
    "log VERBOSE": "VERBOSE",
}
#: The letter that opens a line of Triton's log, by level (verbose lines are written as info).
LETTER = {"INFO": "I", "WARNING": "W", "ERROR": "E", "VERBOSE": "I"}

CONFIG = model_config(MODEL, "python", [("TAG", "INT32", [1])], [("TAG", "INT32", [1])])
_LINE = re.compile(r"^(?P<letter>[IWE])\S* \S+ \d+ (?P<where>\S+)\] logger_levels: (?P<call>.+) (?P<tag>\d+)$")


def setup(server: TritonServer) -> None:
    server.python_model(MODEL, SOURCE, CONFIG)


def verbose_level(server: TritonServer) -> int:
    """Triton's verbose level now (the logging extension's ``log_verbose_level``)."""
    return int(server.models.log_settings()["log_verbose_level"])


def set_verbose_level(server: TritonServer, level: int) -> None:
    """Change Triton's verbose level at run time, as ``--log-verbose`` sets it at start."""
    server.models.log_settings({"log_verbose_level": level})


@dataclass
class Logged:
    """The lines one request to logger_levels left in the server's log: call -> (letter, model.py:line)."""

    tag: int
    verbose: int  # Triton's verbose level during the request
    lines: dict[str, tuple[str, str]]

    @property
    def ok(self) -> bool:
        """Every call's line is there with its level's letter, but verbose ones at verbose level 0."""
        expected = {call for call, level in CALLS.items() if level != "VERBOSE" or self.verbose >= 1}
        return set(self.lines) == expected and all(self.lines[c][0] == LETTER[CALLS[c]] for c in self.lines)

    def __str__(self) -> str:
        rows = [f"verbose level {self.verbose}: {len(self.lines)} of {len(CALLS)} lines in the log"]
        for call, level in CALLS.items():
            found = self.lines.get(call)
            rows.append(f"  {call:12} ({level:7}) " + (f"{found[0]} ... {found[1]}" if found else "not in the log"))
        return "\n".join(rows)


def logged(server: TritonServer, tag: int) -> Logged:
    """Send one request with ``tag``; return the lines it logged, once the last expected one is there."""
    level = verbose_level(server)
    expected = sum(1 for lv in CALLS.values() if lv != "VERBOSE" or level >= 1)
    mark = server.logs.mark()
    infer(server, MODEL, {"TAG": np.array([tag], np.int32)})

    def lines() -> dict[str, tuple[str, str]]:
        found = {}
        for text in server.logs.since(mark).splitlines():
            match = _LINE.match(text)
            if match and int(match["tag"]) == tag:
                found[match["call"]] = (match["letter"], match["where"])
        return found

    try:  # the stub hands lines over after the answer: wait for all of them, no longer
        found = wait_until(
            lambda: (lambda f: f if len(f) >= expected else None)(lines()), 10.0, "the model's log lines"
        )
    except WaitTimeoutError:
        found = lines()  # fewer than expected: Logged.ok says so
    return Logged(tag, level, found)


def run(server: TritonServer) -> Outcome:
    """Every call's line appears at its level; verbose ones only at verbose level 1."""
    setup(server)
    before = verbose_level(server)
    try:
        set_verbose_level(server, 0)
        quiet = logged(server, 1)
        set_verbose_level(server, 1)
        loud = logged(server, 2)
    finally:
        set_verbose_level(server, before)
    ok = quiet.ok and loud.ok and len(quiet.lines) == 6 and len(loud.lines) == 8
    return Outcome(ok, {"verbose 0": len(quiet.lines), "verbose 1": len(loud.lines)})
