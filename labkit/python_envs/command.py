"""`labkit python-env OUT --package NAME... [--requirements FILE] [--pack]`: an execution environment for
Python models, for the Python of the stub that will run it (see builder.py)."""

from __future__ import annotations

import argparse
import sys

from .builder import python_env
from .stub_pythons import RUNTIMES


def _python_env(args: argparse.Namespace) -> int:
    env = python_env(
        args.out,
        args.package or (),
        requirements=args.requirements,
        pack=args.pack,
        python=args.python,
        runtime=args.server,
        image=args.image,
        replace=args.replace,
        progress=lambda line: print(line, file=sys.stderr, flush=True),  # progress apart from the result
    )
    print(f"environment {env.path}")
    print(f"python      {env.python}")
    print(f"numpy       {env.numpy}")
    print(f"seconds     {env.seconds:.1f}{' (cached build)' if env.cached else ''}")
    print(f"config      {env.parameter(env.path.parent)}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit python-env` to labkit's parser."""
    cmd = sub.add_parser(
        "python-env",
        help="build an execution environment (EXECUTION_ENV_PATH) for Python models: a folder, or --pack a .tar.gz",
        description="Build a venv of the Python that the target runtime's stub embeds, with the packages given "
        "and numpy<2 (23.12's stub answers empty outputs under numpy 2): a folder at OUT, or with --pack "
        "OUT.tar.gz beside it. Built once per package list in labkit's cache; nothing existing is replaced "
        "unless --replace. Give it to a model in its config.pbtxt (the `config` line printed).",
    )
    cmd.add_argument("out", metavar="OUT", help="the environment's folder (e.g. model_repository/MODEL/env)")
    cmd.add_argument("--package", action="append", metavar="NAME", help="a pip requirement (repeatable)")
    cmd.add_argument("--requirements", metavar="FILE", help="a pip requirements file")
    cmd.add_argument("--pack", action="store_true", help="write OUT.tar.gz (python_backend unpacks it at load)")
    cmd.add_argument("--python", metavar="X.Y", help="another Python whose stub the runtime holds (default: its own)")
    cmd.add_argument("--server", choices=RUNTIMES, default="embedded", help="the runtime that will run it")
    cmd.add_argument("--image", help="with --server docker: the image (default: the offline CPU image)")
    cmd.add_argument("--replace", action="store_true", help="replace OUT if it exists")
    cmd.set_defaults(func=_python_env)
