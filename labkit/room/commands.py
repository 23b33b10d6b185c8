"""`labkit room ...`: the room's subcommands, registered on labkit's command line."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import RoomSettingsError
from .hub.lab_image import HUB_JUPYTERHUB
from .settings import GRADER_IMAGE, PARTICIPANT_IMAGE, RoomSettings, parse_size


def _memory(text: str) -> str:
    try:
        parse_size(text.upper(), "--memory", spawner=True)
    except RoomSettingsError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a size such as 512M or 2G") from None
    return text.upper()


def add_settings_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `room up` (RoomSettings' fields), which `room k8s` and `room bench` take too."""
    defaults = RoomSettings()
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--participants",
        type=int,
        default=len(defaults.participants),
        metavar="N",
        help="logins p01 … pNN (default %(default)s)",
    )
    who.add_argument("--participants-file", metavar="FILE", help="logins, one per line (or a CSV's first column)")
    p.add_argument("--port", type=int, default=defaults.port, help="the room's address (default %(default)s)")
    p.add_argument("--ip", default=defaults.ip, help="listen only on this address (default: every interface)")
    p.add_argument("--dir", default=str(defaults.directory), help="the room's folder (default %(default)s)")
    p.add_argument("--cpu", type=float, default=defaults.cpu, help="CPUs per lab (default %(default)s)")
    p.add_argument("--memory", type=_memory, default=defaults.memory, help="memory per lab (default %(default)s)")
    p.add_argument(
        "--cull-idle-s", type=int, default=defaults.cull_idle_s, help="stop labs idle this long (default %(default)s)"
    )
    p.add_argument("--image", default=PARTICIPANT_IMAGE, help="the labs' image (default %(default)s, built if missing)")
    p.add_argument(
        "--config", metavar="FILE", help="a jupyterhub_config.py of the site's own (OAuth, ...), loaded last"
    )
    p.add_argument(
        "--swarm",
        action="store_true",
        help="run the labs as Swarm services on the workers of the swarm this engine manages (the hub, its "
        "proxy and the board stay here); the labs' image is copied to the workers that --node-engine names",
    )
    p.add_argument(
        "--node-engine",
        action="append",
        default=[],
        metavar="URL",
        help="with --swarm: a node's own Docker engine (ssh://user@host, tcp://host:2376, unix:///path, as "
        "DOCKER_HOST takes it), once per worker: the images are copied there from this engine, and `room down "
        "--delete-work` removes the work there",
    )
    p.add_argument(
        "--teacher-lab",
        action="store_true",
        help="give the teacher a lab of their own too (by default they land on the board, and have none)",
    )
    return p


def settings_from(args: argparse.Namespace) -> RoomSettings:
    """The RoomSettings that `add_settings_options`' arguments give."""
    from .hub.lifecycle import read_participants

    if args.participants_file:
        logins = read_participants(Path(args.participants_file))
    else:
        logins = RoomSettings.numbered(args.participants)
    return RoomSettings(
        participants=logins,
        port=args.port,
        directory=Path(args.dir),
        cpu=args.cpu,
        memory=args.memory,
        cull_idle_s=args.cull_idle_s,
        image=args.image,
        ip=args.ip,
        config_file=Path(args.config) if args.config else None,
        grader_image=getattr(args, "grader_image", None) or GRADER_IMAGE,
        teacher_lab=bool(getattr(args, "teacher_lab", False)),
        swarm=bool(getattr(args, "swarm", False)),
        node_engines=tuple(getattr(args, "node_engine", None) or ()),
    )


def _up(args: argparse.Namespace) -> int:
    from .hub.lifecycle import up

    settings = settings_from(args)
    info = up(settings)
    logins = settings.participants
    if info.recovered:
        print(f"its previous hub had died: ended what it left running ({', '.join(info.recovered)})")
    if info.replaced_labs:
        print(
            f"labs made for another hub address removed, their work volumes kept ({', '.join(info.replaced_labs)}): "
            "each starts again at the participant's next visit"
        )
    print(f"room {info.room_id} answers at {info.url} ({len(logins)} participants, ready in {info.seconds:.0f} s)")
    print(
        f"logins and password: {Path(args.dir) / 'participants.csv'}; teacher's token and password: "
        f"{Path(args.dir) / 'room.json'}; board: {info.url}services/board/ (where the teacher lands after "
        f"logging in{'' if settings.teacher_lab else '; they have no lab of their own: --teacher-lab gives one'})"
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    from .hub.lifecycle import status_text

    print(status_text(Path(args.dir)))
    return 0


def _down(args: argparse.Namespace) -> int:
    from .hub.lifecycle import down_report

    done = down_report(Path(args.dir), delete_work=args.delete_work, engines=tuple(args.node_engine))
    print("\n".join(f"removed {what}" for what in done.removed) or "nothing of this room was running")
    if not args.delete_work:
        print("participants' work volumes kept (`labkit room down --delete-work` removes them)")
    for node, volumes in done.left.items():
        print(
            f"work volumes left on {node}, whose engine labkit cannot reach: {' '.join(volumes)}; remove them "
            f"there (`docker volume rm {' '.join(volumes)}`), or run this again with `--node-engine URL` for its engine"
        )
    return 0


def _rehome(args: argparse.Namespace) -> int:
    from .hub.rehome import rehome

    print("\n".join(rehome(Path(args.dir), args.source, args.target or "", timeout_s=args.timeout_s)))
    return 0


def _image(args: argparse.Namespace) -> int:
    from .hub.lab_image import build_image

    built = build_image(force=args.force, tag=args.tag, jupyterhub=args.jupyterhub)
    print(built)
    if args.grader:
        from ..docker.engine import connect
        from .grader.image import build_grader_image as build_grader
        from .k8s.values import chart_image

        tag = args.grader_tag
        if args.jupyterhub != HUB_JUPYTERHUB:
            tag = ":".join(chart_image(tag))  # the chart's grader, on the chart's lab image
        client = connect(timeout=900)
        try:
            build_grader(client, built.tag, tag)
        finally:
            client.close()
        print(f"{tag}: the grader (labkit's checks and solutions): push it only to a registry participants cannot read")
    return 0


def _k8s(args: argparse.Namespace) -> int:
    from .k8s import values as k8s

    settings = settings_from(args)
    credentials = None if settings.config_file else k8s.Credentials.generate()
    target = k8s.write(settings, args.out, credentials)
    name, tag = k8s.chart_image(settings.image)
    print(f"wrote {target} (Zero to JupyterHub {k8s.CHART_VERSION}; keep it private)")
    if credentials:
        print(f"participants' password: {credentials.user_password}")
        print(
            f"teacher ({settings.teacher}) password: in {target}, hub.config.SharedPasswordAuthenticator.admin_password"
        )
    print(f"the labs run {name}:{tag} (JupyterHub {k8s.CHART_JUPYTERHUB}.*): push it where the cluster pulls from")
    if settings.board:
        print(
            f"the board and its graders run {k8s.grader_image(settings)} (it holds the solutions): push it to a "
            f"private registry; `labkit room image --jupyterhub {k8s.CHART_JUPYTERHUB} --grader` builds both"
        )
    print("helm repo add jupyterhub https://hub.jupyter.org/helm-chart/ && helm repo update")
    print(
        f"helm upgrade --install room jupyterhub/jupyterhub --namespace room --create-namespace "
        f"--version {k8s.CHART_VERSION} --values {target}"
    )
    if settings.board:
        print(f"kubectl --namespace room apply -f {target.parent / k8s.POLICY_FILE}   # no network for grader Pods")
    return 0


def _bench(args: argparse.Namespace) -> int:
    import json

    from . import bench

    settings = settings_from(args)
    result = bench.run(
        settings, timeout_s=args.timeout_s, checks_timeout_s=args.checks_timeout_s, notebook=args.notebook
    )
    print(bench.report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return 0


def _grades(args: argparse.Namespace) -> int:
    from .board.progress import export_grades

    if args.url and not args.token:
        from ..errors import BoardError

        raise BoardError(
            url=args.url,
            problem="is not asked without a token",
            remedy="`labkit room grades --url` needs --token: the teacher's API token (the hub's token page)",
        )
    return export_grades(Path(args.dir), args.csv, url=args.url or "", token=args.token or "")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `labkit room` and its subcommands to labkit's parser."""
    room = sub.add_parser(
        "room", help="a workshop room on JupyterHub: `labkit room up|status|grades|down|rehome|k8s|bench`"
    )
    commands = room.add_subparsers(dest="room_command", required=True)
    defaults = RoomSettings()

    up = add_settings_options(
        commands.add_parser("up", help="start the hub (returns once it answers) and write room/room.json")
    )
    up.set_defaults(func=_up)

    status = commands.add_parser("status", help="who is running")
    status.add_argument("--dir", default=str(defaults.directory))
    status.set_defaults(func=_status)

    grades = commands.add_parser("grades", help="the board's table (participants × exercises) as CSV")
    grades.add_argument("--dir", default=str(defaults.directory), help="the room's folder (default %(default)s)")
    grades.add_argument("--csv", type=Path, help="write the table to this file (default: print it)")
    grades.add_argument("--url", help="ask the board of the room at this address instead (a room on Kubernetes)")
    grades.add_argument("--token", help="with --url: the teacher's API token")
    grades.set_defaults(func=_grades)

    down = commands.add_parser("down", help="stop the hub; remove the room's containers and network")
    down.add_argument("--dir", default=str(defaults.directory))
    down.add_argument("--delete-work", action="store_true", help="also remove the participants' work volumes")
    down.add_argument(
        "--node-engine",
        action="append",
        default=[],
        metavar="URL",
        help="on a swarm: a node's own engine, where --delete-work removes the work (default: the ones "
        "`room up` was given)",
    )
    down.set_defaults(func=_down)

    rehome = commands.add_parser(
        "rehome",
        help="a room on a swarm: start the labs of a node that is not coming back on another worker, with the "
        "notebooks the board last saw",
    )
    rehome.add_argument("--dir", default=str(defaults.directory), help="the room's folder (default %(default)s)")
    rehome.add_argument(
        "--from", dest="source", required=True, metavar="NODE", help="the node gone: host name, address or id"
    )
    rehome.add_argument(
        "--to", dest="target", metavar="NODE", help="the worker to move them to (default: the one with fewest labs)"
    )
    rehome.add_argument(
        "--timeout-s", type=float, default=300, help="wait this long for each lab (default %(default)s)"
    )
    rehome.set_defaults(func=_rehome)

    image = commands.add_parser(
        "image", help=f"build the participant image {PARTICIPANT_IMAGE} (reused when unchanged)"
    )
    image.add_argument("--force", action="store_true", help="rebuild even if the recipe is unchanged")
    image.add_argument("--tag", default=PARTICIPANT_IMAGE)
    image.add_argument(
        "--jupyterhub",
        default=HUB_JUPYTERHUB,
        metavar="X.Y",
        help="the JupyterHub of the hub the labs join (default %(default)s, `room up`'s; 5.5 for "
        "`room k8s`, Zero to JupyterHub 4.4.0: tags the image <tag>-hub5.5)",
    )
    image.add_argument(
        "--grader",
        action="store_true",
        help="also build the grader image on it (the board's checks and solutions; `room up` does this itself)",
    )
    image.add_argument(
        "--grader-tag",
        default=GRADER_IMAGE,
        help="with --grader (default %(default)s, `-hub5.5` added for another hub)",
    )
    image.set_defaults(func=_image)

    k8s = add_settings_options(
        commands.add_parser(
            "k8s", help="write a Zero to JupyterHub values file for a room on Kubernetes (no cluster is touched)"
        )
    )
    k8s.add_argument("--out", required=True, type=Path, metavar="DIR", help="writes DIR/values.yaml")
    k8s.add_argument(
        "--grader-image",
        default=GRADER_IMAGE,
        help="the board's and its grader Pods' image, as "
        "the cluster pulls it (default %(default)s; the values add -hub5.5 to its tag)",
    )
    k8s.set_defaults(func=_k8s)

    bench = add_settings_options(
        commands.add_parser(
            "bench",
            help="start a real room, measure it (labs ready, one lab's memory with Triton, the board's "
            "check latency), take it down",
        )
    )
    bench.set_defaults(dir="room-bench", port=8099)  # never a real room's folder or port
    bench.add_argument("--timeout-s", type=float, default=900, help="give up on the labs after this long")
    bench.add_argument(
        "--checks-timeout-s",
        type=float,
        default=900,
        help="stop waiting for the board's verdicts after this long (reported as missing)",
    )
    bench.add_argument(
        "--notebook",
        default="01_python_backend.ipynb",
        help="the notebook every lab saves, its first exercise solved (default %(default)s; "
        "17_real_models.ipynb: the real-model lesson's)",
    )
    bench.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    bench.set_defaults(func=_bench)
