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
        from ..native import cuda_kit  # about 105 MB of wheels: only when asked

        kit = cuda_kit.locate()
        print(f"nvcc          {kit.nvcc} ({kit.version()})")
    if args.real_models:
        from ..course.lessons import real_models  # builds two environments of about 350 MB: only when asked
        from ..python_envs import model_envs

        envs = model_envs.envs_for(real_models.repository(), progress=lambda line: print(f"  {line}", flush=True))
        for name, env in envs.items():
            print(f"{name:13s} {env}")
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
    setup.add_argument(
        "--real-models",
        action="store_true",
        help="also the environments of examples/real_models (PP-OCRv4, silero-vad: built once from their "
        "requirements.txt with pip, about 350 MB each; later serves need no network)",
    )
    setup.set_defaults(func=_setup)

    leftovers = sub.add_parser("cleanup", help="remove Docker containers left by killed labkit sessions")
    leftovers.add_argument("--all", action="store_true", help="remove every labkit container, live owners too")
    leftovers.set_defaults(func=_cleanup)

    check = sub.add_parser("doctor", help="check this machine for the lab: one line per item, with what to do")
    check.set_defaults(func=lambda args: doctor.main())
