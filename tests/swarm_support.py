"""A three-node Docker Swarm on this one machine, for the room's Swarm tests: three dockerd, each in a network
namespace of its own (a manager and two workers), joined by a bridge that lives in a fourth namespace (the
"switch"), so that no address, route or firewall rule of the host is touched.

    with Swarm.create() as swarm:              # or the `swarm` session fixture (tests/test_room_swarm.py)
        swarm.load_image("labkit/lab:23.12-cpu", swarm.nodes, engine)
        swarm.client(swarm.manager).services.list()
        swarm.run_in(swarm.manager, ["python", "-m", "labkit.cli", "room", "up", "--swarm", ...])

Facts this rests on (seen on this machine kind, labkit issue 51):
- ``ip netns exec`` remounts /sys in a private mount namespace, which hides the host's cgroup hierarchies:
  dockerd needs them mounted again inside before it starts. Every mount dockerd makes (overlays, its
  namespaces' bind mounts) stays in that private namespace, and goes with its last process.
- The host's bridge netfilter sends bridged frames through the host's FORWARD chain (policy DROP where an
  engine runs): a bridge in the root namespace drops the nodes' traffic. In a namespace of its own, its
  FORWARD chain is empty and accepts.
- Each engine gets its own cgroup parent, so that teardown finds (and ends) every container it started,
  even after a dockerd killed with SIGKILL.
Teardown leaves nothing: engines and their containers ended, namespaces and bridge gone, cgroups and data
roots removed; a run killed before its teardown is swept by the next one (its owner pid is dead).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import docker.errors

import docker
from labkit.room.hub.node_images import copy_image

STATE = Path("/run/labkit-swarm")  # one folder per swarm: its owner's pid, sockets, exec roots
DATA = Path("/var/lib/labkit-swarm")  # the engines' data roots (overlay2 needs a real file system)
SUBNET = "192.168.213"  # the nodes' link, inside the namespaces only
ADDRESS_POOL = "10.214.0.0/16"  # the swarm's own networks: away from the link and from Docker's defaults
CGROUP_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def say(text: str) -> None:
    """Progress on the terminal even while pytest captures output (loading images takes a minute)."""
    print(f"swarm: {text}", file=sys.__stderr__, flush=True)


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def missing_tools() -> list[str]:
    """The programs the swarm needs (Debian: iproute2, dockerd from docker.io); empty when all are here."""
    return [tool for tool in ("ip", "dockerd", "containerd") if shutil.which(tool) is None]


@dataclass(frozen=True)
class Node:
    name: str  # m, w1, w2
    netns: str
    address: str
    socket: Path
    data_root: Path
    exec_root: Path
    cgroup_parent: str
    bip: str

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"


def _dockerd_script(node: Node) -> str:
    """What runs inside the node's namespace: the cgroup hierarchies mounted again, then dockerd."""
    mounts = ["mount -t tmpfs cgroup /sys/fs/cgroup"]
    for controller in CGROUP_CONTROLLERS:
        mounts.append(f"mkdir -p /sys/fs/cgroup/{controller}")
        mounts.append(f"mount -t cgroup -o {controller} cgroup /sys/fs/cgroup/{controller}")
    mounts.append(
        "mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd"
    )
    dockerd = [
        "exec dockerd",
        f"--data-root {node.data_root}",
        f"--exec-root {node.exec_root}",
        f"-H {node.url}",
        f"--pidfile {node.exec_root}/dockerd.pid",
        f"--bip {node.bip}",
        f"--cgroup-parent /{node.cgroup_parent}",
        "--storage-driver overlay2",
        "--shutdown-timeout 5",
    ]
    return " && ".join(mounts) + " && " + " ".join(dockerd)


def _netns_inode(netns: str) -> int | None:
    try:
        return os.stat(f"/run/netns/{netns}").st_ino
    except OSError:
        return None


def _pids_in(netns_inodes: set[int]) -> list[int]:
    """Every process whose network namespace is one of these (the dockerd, containerd and shims of a node)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.stat(entry / "ns" / "net").st_ino in netns_inodes:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _cgroup_dirs(prefix: str, exact: bool = False) -> list[Path]:
    """The cgroups of a swarm's engines (``/<prefix>-<node>`` under each hierarchy; with ``exact``, of the one
    engine whose cgroup parent is ``prefix``), deepest first."""
    found = []
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        for top in hierarchy.glob(prefix if exact else f"{prefix}-*") if hierarchy.is_dir() else ():
            found += [p for p in top.rglob("*") if p.is_dir()] + [top]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _cgroup_pids(folders: list[Path]) -> set[int]:
    pids: set[int] = set()
    for folder in folders:
        with contextlib.suppress(OSError):
            pids |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
    return pids


def _kill_until_none(pids_now: Callable[[], set[int]], rounds: int) -> None:
    """SIGKILL what ``pids_now`` finds until it finds nothing (a dying process may fork, a shim restart), at most
    ``rounds`` times 0.2 s."""
    for _ in range(rounds):
        pids = pids_now()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def _kill_cgroups(prefix: str) -> None:
    _kill_until_none(lambda: _cgroup_pids(_cgroup_dirs(prefix)), 20)
    for folder in _cgroup_dirs(prefix):
        with contextlib.suppress(OSError):
            folder.rmdir()


def teardown(swarm_id: str) -> list[str]:
    """Remove everything of swarm ``swarm_id``: engines (SIGTERM, then SIGKILL) and every process in its
    namespaces, its containers (by their cgroups), namespaces, bridge, cgroups, sockets and data roots.
    What was left afterwards (empty when clean)."""
    prefix = f"lksw{swarm_id}"
    names = [f"{prefix}-{n}" for n in ("m", "w1", "w2", "sw")]
    inodes = {i for i in map(_netns_inode, names) if i is not None}
    # the engines' data is thrown away: a short grace (dockerd stopping each container takes long), then kill
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        pids = _pids_in(inodes)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while _pids_in(inodes) and time.monotonic() < deadline:
            time.sleep(0.2)
    _kill_cgroups(prefix)
    for name in names:
        _sh("ip", "netns", "del", name, check=False)
    shutil.rmtree(DATA / swarm_id, ignore_errors=True)
    shutil.rmtree(STATE / swarm_id, ignore_errors=True)
    return leftovers(swarm_id)


def leftovers(swarm_id: str) -> list[str]:
    """What of swarm ``swarm_id`` still exists on the host (empty after a clean teardown)."""
    prefix = f"lksw{swarm_id}"
    left = [f"netns {n}" for n in _sh("ip", "netns", "list").stdout.split() if n.startswith(prefix)]
    left += [
        f"link {line.split(':')[1].strip()}" for line in _sh("ip", "-o", "link").stdout.splitlines() if prefix in line
    ]
    left += [f"cgroup {p}" for p in _cgroup_dirs(prefix)]
    left += [f"path {p}" for p in (DATA / swarm_id, STATE / swarm_id) if p.exists()]
    left += [f"mount {line.split()[1]}" for line in Path("/proc/mounts").read_text().splitlines() if swarm_id in line]
    return left


def sweep_abandoned() -> list[str]:
    """Tear down the swarms of earlier runs whose owner process is gone (a run killed before its teardown)."""
    swept = []
    for folder in STATE.glob("*") if STATE.is_dir() else ():
        try:
            owner = int((folder / "owner").read_text())
            os.kill(owner, 0)
            continue  # its owner still runs: another session's swarm
        except (OSError, ValueError):
            pass
        teardown(folder.name)
        swept.append(folder.name)
    return swept


def _enter_netns(netns: str) -> None:
    """Move the calling thread (only it) into ``netns``: sockets it opens then live there."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({netns})")
    finally:
        os.close(fd)


class Swarm:
    """Three engines in namespaces, a swarm of them: ``manager`` and two ``workers``. Use as a context
    manager (or call ``close``): everything goes at the end, whatever happened."""

    def __init__(self, swarm_id: str) -> None:
        self.id = swarm_id
        prefix = f"lksw{swarm_id}"
        self.switch = f"{prefix}-sw"
        self.nodes = [
            Node(
                name=name,
                netns=f"{prefix}-{name}",
                address=f"{SUBNET}.{i}",
                socket=STATE / swarm_id / f"{name}.sock",
                data_root=DATA / swarm_id / name,
                exec_root=STATE / swarm_id / name,
                cgroup_parent=f"{prefix}-{name}",
                bip=f"172.31.{i}.1/24",
            )
            for i, name in enumerate(("m", "w1", "w2"), start=1)
        ]
        self.manager, *self.workers = self.nodes
        self._clients: dict[str, docker.DockerClient] = {}
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._engines: dict[str, subprocess.Popen[bytes]] = {}  # node name -> its engine (the latest)
        self.node_ids: dict[str, str] = {}  # node name -> its swarm node id
        self.images: list[str] = []  # loaded into the workers, in order

    @classmethod
    def create(cls, start_timeout_s: float = 60) -> Swarm:
        """Build it: namespaces and bridge, three engines, `swarm init` and two joins."""
        for swept in sweep_abandoned():
            say(f"removed swarm {swept}, left by a run that was killed")
        swarm = cls(secrets.token_hex(2))
        try:
            swarm._network()
            swarm._start_engines(start_timeout_s)
            swarm._form()
        except BaseException:
            swarm.close()
            raise
        return swarm

    def __enter__(self) -> Swarm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _network(self) -> None:
        (STATE / self.id).mkdir(parents=True)
        (STATE / self.id / "owner").write_text(str(os.getpid()))
        bridge = f"lksw{self.id}"
        _sh("ip", "netns", "add", self.switch)
        _sh("ip", "-n", self.switch, "link", "add", bridge, "type", "bridge")
        _sh("ip", "-n", self.switch, "link", "set", bridge, "up")
        for node in self.nodes:
            port = f"lksw{self.id}{node.name}"
            _sh("ip", "netns", "add", node.netns)
            _sh(
                "ip",
                "-n",
                self.switch,
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                node.netns,
            )
            _sh("ip", "-n", self.switch, "link", "set", port, "master", bridge, "up")
            _sh("ip", "-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
            _sh("ip", "-n", node.netns, "link", "set", "eth0", "up")
            _sh("ip", "-n", node.netns, "link", "set", "lo", "up")

    def _start_engines(self, timeout_s: float) -> None:
        for node in self.nodes:
            node.data_root.mkdir(parents=True)
            node.exec_root.mkdir(parents=True)
            self._launch(node)
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            self._wait_engine(node, deadline)

    def _launch(self, node: Node) -> None:
        log = open(STATE / self.id / f"{node.name}.log", "ab")  # noqa: SIM115 - the engine's, for its life
        self._engines[node.name] = subprocess.Popen(
            ["ip", "netns", "exec", node.netns, "sh", "-c", _dockerd_script(node)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()

    def _wait_engine(self, node: Node, deadline: float) -> None:
        proc = self._engines[node.name]
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"dockerd of node {node.name} exited ({proc.returncode}):\n{self.log(node)}")
            try:
                self.client(node).ping()
                return
            except (docker.errors.DockerException, OSError):
                self._clients.pop(node.name, None)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dockerd of node {node.name} did not answer:\n{self.log(node)}") from None
                time.sleep(0.3)

    def kill_engine(self, node: Node) -> None:
        """SIGKILL ``node``'s engine and everything it ran, at once, as a machine losing power: its dockerd,
        containerd and shims (every process in its namespace) and its containers (their cgroups). The namespace,
        the data root (images, volumes, swarm state) and the bridge stay, for `start_engine`."""
        client = self._clients.pop(node.name, None)
        if client is not None:
            client.close()
        inode = _netns_inode(node.netns)
        netns = {inode} if inode is not None else set()
        _kill_until_none(lambda: set(_pids_in(netns)) | _cgroup_pids(_cgroup_dirs(node.cgroup_parent, exact=True)), 50)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._engines[node.name].wait(timeout=5)
        say(f"engine of {node.name} killed")

    def start_engine(self, node: Node, timeout_s: float = 120) -> None:
        """Start ``node``'s engine again on its data root; returns once the manager sees the node ready."""
        self._launch(node)
        self._wait_engine(node, time.monotonic() + timeout_s)
        if node is self.manager:
            return
        self.wait_node(node, "ready", timeout_s)
        say(f"engine of {node.name} started again, its node ready")

    def wait_node(self, node: Node, state: str, timeout_s: float) -> None:
        """Until the manager sees ``node`` in ``state`` ("ready", "down")."""
        deadline = time.monotonic() + timeout_s
        manager = self.client(self.manager)
        while manager.nodes.get(self.node_ids[node.name]).attrs["Status"]["State"] != state:
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {node.name} not {state} within {timeout_s:.0f} s:\n{self.log(node)}")
            time.sleep(0.5)

    def _form(self) -> None:
        manager = self.client(self.manager)
        manager.swarm.init(advertise_addr=self.manager.address, default_addr_pool=[ADDRESS_POOL])
        token = manager.swarm.attrs["JoinTokens"]["Worker"]
        for node in self.workers:
            self.client(node).swarm.join(
                remote_addrs=[f"{self.manager.address}:2377"], join_token=token, advertise_addr=node.address
            )
        for node in self.nodes:
            self.node_ids[node.name] = self.client(node).info()["Swarm"]["NodeID"]
        deadline = time.monotonic() + 60
        while not all(n.attrs["Status"]["State"] == "ready" for n in manager.nodes.list()) or len(
            manager.nodes.list()
        ) < len(self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the workers did not become ready: {[n.attrs['Status'] for n in manager.nodes.list()]}"
                )
            time.sleep(0.5)
        say(f"swarm {self.id}: manager {self.manager.address}, workers {', '.join(w.address for w in self.workers)}")

    def client(self, node: Node) -> docker.DockerClient:
        if node.name not in self._clients:
            self._clients[node.name] = docker.DockerClient(base_url=node.url, timeout=600)
        return self._clients[node.name]

    def log(self, node: Node, lines: int = 40) -> str:
        try:
            text = (STATE / self.id / f"{node.name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def node_of(self, node_id: str) -> Node:
        return next(n for n in self.nodes if self.node_ids[n.name] == node_id)

    def env(self, node: Node) -> dict[str, str]:
        """The environment of a command run on ``node``: its engine as the default one."""
        return dict(os.environ, DOCKER_HOST=node.url)

    def run_in(self, node: Node, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run a command inside ``node``'s namespace, with its engine as DOCKER_HOST."""
        kwargs.setdefault("env", self.env(node))
        return subprocess.run(["ip", "netns", "exec", node.netns, *argv], capture_output=True, text=True, **kwargs)

    def call_in(self, node: Node, fn: Callable[[], T]) -> T:
        """``fn()`` on a thread that lives in ``node``'s network namespace (HTTP to addresses only it reaches)."""
        if node.name not in self._threads:
            self._threads[node.name] = ThreadPoolExecutor(1, initializer=_enter_netns, initargs=(node.netns,))
        return self._threads[node.name].submit(fn).result()

    def load_image(self, tag: str, nodes: list[Node], source: docker.DockerClient) -> None:
        """``tag`` from ``source`` into each node lacking it (there is no registry here), with progress: labkit's
        own copy (labkit.room.hub.node_images), the one `room up --swarm --node-engine` does."""
        t0 = time.monotonic()
        copied = copy_image(source, tag, {node.name: self.client(node) for node in nodes})
        self.images.append(tag)
        if copied:
            say(f"{tag} loaded into {', '.join(copied)} in {time.monotonic() - t0:.0f} s")

    def close(self) -> None:
        for pool in self._threads.values():
            pool.shutdown(wait=False)
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        t0 = time.monotonic()
        left = teardown(self.id)
        say(f"swarm {self.id} removed in {time.monotonic() - t0:.0f} s")
        for proc in self._engines.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        if left:
            raise RuntimeError(f"swarm {self.id} left {left}")
