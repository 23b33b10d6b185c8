"""`labkit room ...`: the room's subcommands, registered on labkit's command line."""

from __future__ import annotations

import argparse
from pathlib import Path

from .settings import RoomSettings


def add_settings_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `room up`, which `room k8s` and `room bench` take too (RoomSettings' fields)."""
    d = RoomSettings()
    p.add_argument("--participants", type=int, default=len(d.participants), metavar="N",
                   help=f"logins p01 … pNN (default {len(d.participants)})")
    p.add_argument("--port", type=int, default=d.port, help=f"the hub's port (default {d.port})")
    p.add_argument("--dir", dest="directory", type=Path, default=d.directory,
                   help=f"the room's folder: state, logs, room.json (default {d.directory})")
    p.add_argument("--cpu", type=float, default=d.cpu, help=f"cores per lab (default {d.cpu:g})")
    p.add_argument("--memory", default=d.memory, help=f"memory per lab, K/M/G/T (default {d.memory})")
    p.add_argument("--cull-idle-s", type=int, default=d.cull_idle_s,
                   help=f"stop a lab idle this long (default {d.cull_idle_s}; 0: never)")
    p.add_argument("--image", default=d.image, help=f"the participants' lab image (default {d.image})")
    p.add_argument("--grader-image", default=d.grader_image, help=f"the board's grader image (default {d.grader_image})")
    p.add_argument("--teacher", default=d.teacher, help=f"the teacher's login (default {d.teacher})")
    p.add_argument("--config", dest="config_file", type=Path, metavar="FILE",
                   help="a site's own jupyterhub_config.py additions (an OAuthenticator, ...)")
    return p


def settings_from(args: argparse.Namespace) -> RoomSettings:
    return RoomSettings(participants=RoomSettings.numbered(args.participants), port=args.port,
                        directory=args.directory, cpu=args.cpu, memory=args.memory, cull_idle_s=args.cull_idle_s,
                        image=args.image, grader_image=args.grader_image, teacher=args.teacher,
                        config_file=args.config_file)


def _k8s(args: argparse.Namespace) -> int:
    from . import k8s

    settings = settings_from(args)
    credentials = None if settings.config_file else k8s.Credentials.generate()
    target = k8s.write(settings, args.out, credentials)
    name, tag = k8s.chart_image(settings.image)
    print(f"wrote {target} (Zero to JupyterHub {k8s.CHART_VERSION}; keep it private)")
    if credentials:
        print(f"participants' password: {credentials.user_password}")
        print(f"teacher ({settings.teacher}) password: in {target}, hub.config.SharedPasswordAuthenticator.admin_password")
    print(f"the labs run {name}:{tag} (JupyterHub {k8s.CHART_JUPYTERHUB}.*): push it where the cluster pulls from")
    print("helm repo add jupyterhub https://hub.jupyter.org/helm-chart/ && helm repo update")
    print(f"helm upgrade --install room jupyterhub/jupyterhub --namespace room --create-namespace "
          f"--version {k8s.CHART_VERSION} --values {target}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    import json

    from . import bench

    settings = settings_from(args)
    result = bench.run(settings, timeout_s=args.timeout_s, checks_timeout_s=args.checks_timeout_s)
    print(bench.report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `labkit room` and its subcommands to labkit's parser."""
    room = sub.add_parser("room", help="a workshop room on JupyterHub: `labkit room up|status|grades|down|k8s|bench`")
    commands = room.add_subparsers(dest="room_command", required=True)
    k8s = add_settings_options(commands.add_parser(
        "k8s", help="write a Zero to JupyterHub values file for a room on Kubernetes (no cluster is touched)"))
    k8s.add_argument("--out", required=True, type=Path, metavar="DIR", help="writes DIR/values.yaml")
    k8s.set_defaults(func=_k8s)

    bench = add_settings_options(commands.add_parser(
        "bench", help="start a real room, measure it (labs ready, one lab's memory with Triton, the board's "
                      "check latency), take it down"))
    bench.set_defaults(directory=Path("room-bench"), port=8099)  # never a real room's folder or port
    bench.add_argument("--timeout-s", type=float, default=900, help="give up on the labs after this long")
    bench.add_argument("--checks-timeout-s", type=float, default=900,
                       help="stop waiting for the board's verdicts after this long (reported as missing)")
    bench.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    bench.set_defaults(func=_bench)
