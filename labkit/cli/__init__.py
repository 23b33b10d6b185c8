"""The `labkit` command: serve a repository, run the demo tour, the benchmarks and perf_analyzer sweeps,
build C++ backends into a backend directory, set up the cache, manage Docker.

Exit codes: 0 done (checks passed); 1 a check did not pass (`workshop check`: an exercise is not yet
passed; `doctor`: a required item is missing; `demo`: a tour check failed; `serve`: Triton exited);
2 a usage error (argparse: unknown command, bad or missing argument); 3 labkit stopped and said what
went wrong (a LabkitError, printed as `labkit: ...`).
"""

from __future__ import annotations

import argparse
import sys

from ..course import workshop
from ..docker import cpu_image
from ..errors import LabkitError
from ..python_envs import command as python_env_command
from ..repository import repository_export
from ..room import commands as room_commands
from . import backends, benchmark, demo, machine, perf, serve

EXIT_OK = 0
EXIT_NOT_PASSED = 1  # a verdict, not an error: `workshop check` not yet, `doctor` FAIL, a demo check
EXIT_USAGE = 2  # argparse's own code for a command line it cannot parse
EXIT_LABKIT_ERROR = 3  # a LabkitError: labkit said what went wrong and what to do

#: Every command's module, in the order `labkit --help` lists them: each adds its parsers with
#: ``register(sub)`` and sets ``func``, which carries out a parsed command line and returns the exit code.
COMMANDS = (
    serve,
    demo,
    benchmark,
    backends,
    repository_export,
    perf,
    machine,
    workshop,
    cpu_image,
    room_commands,
    python_env_command,
)


def parser() -> argparse.ArgumentParser:
    """The `labkit` command line (the site's CLI reference is generated from it)."""
    description, _, epilog = (__doc__ or "").partition("\n\n")
    root = argparse.ArgumentParser(
        prog="labkit", description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = root.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return EXIT_LABKIT_ERROR


__all__ = ["EXIT_LABKIT_ERROR", "EXIT_NOT_PASSED", "EXIT_OK", "EXIT_USAGE", "main", "parser"]
