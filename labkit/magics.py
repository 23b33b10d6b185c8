"""IPython cell magics: write a backend in a cell and have it serving when the cell ends.

    %load_ext labkit
    %%triton_config add_sub            -> writes add_sub/config.pbtxt as written (reloads add_sub if loaded)
    %%triton_python add_sub            -> writes add_sub/1/model.py and (re)loads add_sub
    %%triton_python --backend shared   -> writes backends/shared/model.py and reloads its loaded models
    %%triton_cpp minimal               -> compiles libtriton_minimal.so, (re)loads the models using it
    %%triton_cpp --debug minimal       -> the same, built -O0 -g for stepping with gdb
    %%triton_cpp kernels --cuda        -> the cell (and any .cu files) compiled with nvcc, cudart linked
    %%triton_cpp --define N=4 minimal  -> compiles it with -DN=4 (repeatable: one --define per macro)
    %%triton_cpp bls --sources src/    -> compiles the files (a folder: its .cc/.cpp, headers beside);
                                          a cell body, if any, is compiled with them as bls.cc

Line numbers in compiler messages, tracebacks and crash reports are the editor's: the magic line is
line 1 (a %%triton_python cell's model.py keeps it as a comment, so its lines are the cell's).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from .errors import ConfigError, MissingConfigError
from .server.base import current


def _parser(name: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"%%{name}", add_help=False, exit_on_error=False)
    parser.add_argument("name", help="model name (or backend name with --backend)")
    parser.add_argument("--backend", action="store_true", help="write a Python-based backend shared by many models")
    parser.add_argument("--no-load", action="store_true", help="only write the file")
    return parser


def triton_python(line: str, cell: str) -> None:
    try:
        args = _parser("triton_python").parse_args(shlex.split(line))
    except (argparse.ArgumentError, SystemExit):
        raise ConfigError(
            field="%%triton_python",
            value=line,
            problem="cannot read these arguments",
            remedy="usage: %%triton_python [--backend] [--no-load] NAME",
        ) from None
    server = current()
    cell = f"# %%triton_python {line.strip()}\n{cell}"  # model.py line N is the cell's line N
    if args.backend:
        users = server.python_backend(args.name, cell, reload=not args.no_load)
        print(f"wrote model.py for backend {args.name!r}" + (f"; reloaded {', '.join(users)}" if users else ""))
        return
    if not (server.repository.model_dir(args.name) / "config.pbtxt").exists():
        raise MissingConfigError(
            model=args.name,
            source=str(server.repository.model_dir(args.name) / "config.pbtxt"),
            remedy=f"write it first, e.g. lab.repository.write_config(labkit.model_config({args.name!r}, "
            "'python', inputs, outputs)), or with %%triton_config",
        )
    server.python_model(args.name, cell, load=not args.no_load)
    print(f"model {args.name!r}: model.py written" + ("" if args.no_load else ", loaded and READY"))


def triton_config(line: str, cell: str) -> None:
    """The cell is the model's config.pbtxt, in Triton's own text format: written as it is, after labkit has
    read it as Triton's ModelConfig (a misspelt field is a ConfigError naming it). Triton validates the
    rest when it loads the model: a loaded model is reloaded at once, so its errors show under this cell."""
    try:
        args = _parser("triton_config").parse_args(shlex.split(line))
    except (argparse.ArgumentError, SystemExit):
        raise ConfigError(
            field="%%triton_config",
            value=line,
            problem="cannot read these arguments",
            remedy="usage: %%triton_config [--no-load] NAME",
        ) from None
    if args.backend:
        raise ConfigError(
            field="%%triton_config",
            value=line,
            problem="writes a model's config.pbtxt, not a backend's",
            remedy="give the model's name, without --backend",
        )
    server = current()
    path = server.repository.write_config_text(args.name, cell)
    where = path.relative_to(server.repository.root)
    if args.no_load or args.name not in server.loaded_models():
        print(f"wrote {where} as written; Triton reads it when the model loads")
        return
    server.repository.mark_changed(args.name)
    server.load(args.name)
    print(f"wrote {where} as written; reloaded {args.name!r}")


def triton_cpp(line: str, cell: str) -> None:
    parser = argparse.ArgumentParser(prog="%%triton_cpp", add_help=False, exit_on_error=False)
    parser.add_argument("backend")
    parser.add_argument("--models", help="comma-separated models to (re)load; default: all that use the backend")
    parser.add_argument("--headers", help="'official' or an include folder with Triton's own headers")
    parser.add_argument("--debug", action="store_true", help="build with -O0 -g, for stepping with gdb")
    parser.add_argument("--cuda", action="store_true", help="compile with nvcc and link cudart (labkit setup --cuda)")
    parser.add_argument(
        "--sources",
        nargs="+",
        metavar="PATH",
        help=".cc/.cpp files or a folder to compile (its headers beside them); the cell may be empty",
    )
    parser.add_argument("--define", action="append", metavar="NAME=VALUE", help="a macro for the compiler; repeatable")
    try:
        args = parser.parse_args(shlex.split(line))
    except (argparse.ArgumentError, SystemExit):
        raise ConfigError(
            field="%%triton_cpp",
            value=line,
            problem="cannot read these arguments",
            remedy=(
                "usage: %%triton_cpp [--models a,b] [--headers official|DIR] [--debug] [--cuda] "
                "[--define NAME=VALUE ...] BACKEND [--sources FILE_OR_FOLDER ...]"
            ),
        ) from None
    server = current()
    models = args.models.split(",") if args.models else None
    # The cell body starts on the editor's line 2 (line 1 is the magic); files keep their own lines.
    paths = [Path(p) for p in args.sources or []]
    source: str | list[str | Path] = [*paths, *([cell] if cell.strip() else [])] if paths else cell
    served = server.cpp_backend(
        args.backend,
        source,
        models,
        headers=args.headers,
        first_line=2,
        debug=args.debug,
        **({"cuda": True} if args.cuda else {}),
        defines=args.define,
    )
    if served:
        print("serving: " + ", ".join(f"{m} (version {v})" for m, v in served.items()))
    else:
        print(f"built; no model in the repository uses backend {args.backend!r} yet")


def register(ipython: Any) -> None:
    ipython.register_magic_function(triton_config, magic_kind="cell", magic_name="triton_config")
    ipython.register_magic_function(triton_python, magic_kind="cell", magic_name="triton_python")
    ipython.register_magic_function(triton_cpp, magic_kind="cell", magic_name="triton_cpp")
