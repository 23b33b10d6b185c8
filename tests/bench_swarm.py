"""`make bench-swarm`: `labkit room bench --swarm` on a real three-engine swarm built on this machine (a manager
and two workers in network namespaces: tests/swarm_support.py), then removed. Needs root, `ip` and `dockerd`.

    python tests/bench_swarm.py --participants 6 --json bench-swarm-6.json
    python tests/bench_swarm.py --participants 6 --notebook 17_real_models.ipynb --json bench-swarm-17.json

The lab image and the grader image (built from this checkout if outdated, as `room up` does) are loaded from
this machine's engine into the three engines (there is no registry); the bench then runs on the manager, in its
namespace, with `--node-engine` for each worker, exactly as a teacher runs it on a real swarm. ``--grader-tag``
builds the grader under another tag here (a run that leaves the shared tag alone): it is named
labkit/grader:23.12-cpu inside the swarm, where the room looks for it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from swarm_support import Swarm, missing_tools

import docker
from labkit.room.grader.image import build_grader_image
from labkit.room.settings import GRADER_IMAGE, PARTICIPANT_IMAGE


def _bench_argv(swarm: Swarm, args: argparse.Namespace, room_dir: Path) -> list[str]:
    argv = [sys.executable, "-m", "labkit.cli", "room", "bench", "--swarm", "--dir", str(room_dir)]
    argv += ["--participants", str(args.participants), "--image", args.lab_image, "--notebook", args.notebook]
    argv += [f"--node-engine={worker.url}" for worker in swarm.workers]
    return argv + (["--json", str(Path(args.json).absolute())] if args.json else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/bench_swarm.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--participants", type=int, default=6, metavar="N")
    parser.add_argument("--notebook", default="01_python_backend.ipynb")
    parser.add_argument("--json", metavar="PATH", help="the bench's numbers as JSON")
    parser.add_argument("--lab-image", default=PARTICIPANT_IMAGE, help="built here (`labkit room image`)")
    parser.add_argument("--grader-tag", default=GRADER_IMAGE, help="build the grader image here under this tag")
    args = parser.parse_args(argv)
    if os.geteuid() != 0 or missing_tools():
        print(f"a swarm in namespaces needs root and {missing_tools() or 'ip, dockerd'}", file=sys.stderr)
        return 2
    host = docker.from_env(timeout=900)
    t0 = time.monotonic()
    build_grader_image(host, base=args.lab_image, tag=args.grader_tag)
    print(f"bench-swarm: grader image {args.grader_tag} ready in {time.monotonic() - t0:.0f} s", flush=True)
    with Swarm.create() as swarm, tempfile.TemporaryDirectory(prefix="labkit-bench-swarm-") as tmp:
        swarm.load_image(args.lab_image, swarm.nodes, host)
        swarm.load_image(args.grader_tag, swarm.nodes, host)
        if args.grader_tag != GRADER_IMAGE:
            for node in swarm.nodes:
                swarm.client(node).images.get(args.grader_tag).tag(GRADER_IMAGE)
        command = ["ip", "netns", "exec", swarm.manager.netns, *_bench_argv(swarm, args, Path(tmp) / "room")]
        print("bench-swarm:", " ".join(command[4:]), flush=True)
        return subprocess.run(command, env=swarm.env(swarm.manager), check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
