"""`labkit setup` (Triton, perf_analyzer and headers into labkit's cache), `labkit cleanup` (containers
left by killed sessions) and `labkit doctor` (this machine checked for the lab)."""

from __future__ import annotations

import argparse

from ..docker.orphans import cleanup
from ..observe import perf_dist
from ..plumbing import triton_dist
from . import doctor


def _setup(args: argparse.Namespace) -> int:
    dist = triton_dist.locate()
    print(f"tritonserver  {dist.binary}")
    print(f"perf_analyzer {perf_dist.locate(check=True).binary}")
    from ..native.official import (
        rapidjson_include,  # official-mode C++ builds (Triton's triton_json.h)
    )

    print(f"rapidjson     {rapidjson_include()}")
    if args.cuda:
        from ..gpu import cuda_kit  # about 105 MB of wheels: only when asked

        kit = cuda_kit.locate()
        print(f"nvcc          {kit.nvcc} ({kit.version()})")
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    removed = cleanup(all=args.all)
    print("\n".join(f"removed {name}" for name in removed) or "no leftovers")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit setup`, `labkit cleanup` and `labkit doctor` to labkit's parser."""
    setup = sub.add_parser(
        "setup", help="fetch Triton 23.12, perf_analyzer 23.12 and RapidJSON's headers into labkit's cache (once)"
    )
    setup.add_argument(
        "--cuda",
        action="store_true",
        help="also nvcc and cudart (CUDA 13.0 wheels, about 105 MB) for %%%%triton_cpp NAME --cuda",
    )
    setup.set_defaults(func=_setup)

    leftovers = sub.add_parser("cleanup", help="remove Docker containers left by killed labkit sessions")
    leftovers.add_argument("--all", action="store_true", help="remove every labkit container, live owners too")
    leftovers.set_defaults(func=_cleanup)

    check = sub.add_parser("doctor", help="check this machine for the lab: one line per item, with what to do")
    check.set_defaults(func=lambda args: doctor.main())
