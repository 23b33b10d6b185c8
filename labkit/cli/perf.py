"""`labkit perf`: a model measured with perf_analyzer 23.12 across concurrencies or request rates."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..course import reference
from ..errors import MissingConfigError
from ..native import deploy
from ..observe.perf_analyzer import PerfOptions, check_steps, perf as sweep_with_perf_analyzer
from ..plumbing.transport import Transport
from .options import builds_reference, check_own_library, numbers, server_for, with_server


def _perf(args: argparse.Namespace) -> int:
    if args.concurrency and args.request_rate:
        args.usage_error("give --concurrency or --request-rate, not both")
    check_steps(args.concurrency, args.request_rate)  # before a server starts
    source = Path(args.repository) if args.repository else reference.repository()
    if not (source / args.model / "config.pbtxt").is_file():
        raise MissingConfigError(
            model=args.model,
            source=str(source / args.model / "config.pbtxt"),
            remedy="give --repository, a folder holding <model>/config.pbtxt",
        )
    own = reference.is_reference_repository(
        source
    )  # labkit's models: copied into the server's workspace, reference backends built
    build_reference = builds_reference(args, source)
    if not build_reference:
        check_own_library(source, args.model, args.backend_directory)
    shapes = {}
    for item in args.shape or []:
        name, _, dims = item.partition(":")
        shapes[name] = numbers(dims)
    # A person's repository is served where it is (its libraries included), as `labkit serve` does.
    with server_for(args, None if own else source, backend_directory=args.backend_directory) as server:
        print(f"starting Triton 23.12 ({args.server}) with {args.model} ...", flush=True)
        server.start()
        if own:
            reference.copy_into(server, [args.model])
        if build_reference:
            deploy.load_models(server.models, [args.model])  # builds a C++ reference backend first
        else:
            server.load(args.model)
        options = PerfOptions(
            concurrency=args.concurrency,
            request_rate=args.request_rate,
            distribution=args.distribution,
            protocol=args.protocol,
            batch=args.batch,
            shapes=shapes,
            measurement_ms=args.measurement_ms,
            stability_percent=args.stability_percent,
        )
        sweep = sweep_with_perf_analyzer(server, args.model, options)
    print(sweep.table())
    if args.json:
        print(f"wrote {sweep.to_json(args.json)}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit perf` to labkit's parser."""
    perf_cmd = with_server(
        sub.add_parser("perf", help="measure a model with perf_analyzer 23.12 across concurrencies or request rates")
    )
    perf_cmd.add_argument("model")
    perf_cmd.add_argument("--repository", help="where the model is (default: the reference models)")
    perf_cmd.add_argument(
        "--backend-directory",
        metavar="DIR",
        help="serve the backends built in DIR (DIR/<name>/libtriton_<name>.so); DIR is linked, never written",
    )
    perf_cmd.add_argument(
        "--build-reference-backends",
        action="store_true",
        help="build labkit's reference C++ backend when the model names one (minimal, recommended, "
        "custom), writing it into the model's version folder (done anyway for labkit's own models)",
    )
    perf_cmd.add_argument("--concurrency", type=numbers, help="e.g. 1,2,4,8 (the default)")
    perf_cmd.add_argument(
        "--request-rate", type=lambda t: numbers(t, float), help="requests per second, e.g. 100,200,400"
    )
    perf_cmd.add_argument(
        "--distribution",
        choices=["constant", "poisson"],
        default="constant",
        help="how request-rate arrivals are spaced",
    )
    perf_cmd.add_argument("--protocol", choices=Transport.choices(), default=Transport.HTTP.value)
    perf_cmd.add_argument("--batch", type=int, default=1, help="rows per request (batching models)")
    perf_cmd.add_argument("--shape", action="append", help="NAME:D1,D2 for an input with -1 dimensions (repeatable)")
    perf_cmd.add_argument("--measurement-ms", type=int, default=1000, help="length of a measurement window")
    perf_cmd.add_argument("--stability-percent", type=float, default=10)
    perf_cmd.add_argument("--json", metavar="PATH", help="also write the table as JSON")
    perf_cmd.set_defaults(func=_perf, usage_error=perf_cmd.error)
