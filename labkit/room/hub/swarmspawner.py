"""The room's labs as Docker Swarm services: DockerSpawner 14's SwarmSpawner, with what labkit changes in it.

`labkit room up --swarm` names this class in the hub's configuration. Each change works around a defect of
SwarmSpawner 14, or a limit of the swarms it was checked on (labkit issue 51), and says which:

- **Named volumes mounted as binds** (dockerspawner#536): Swarm rejects the task and the spawn waits for
  its timeout. Mounted here as volumes, created on their node with the room's work labels.
- **Work left behind on another node**: a volume lives on one node, and Swarm would start a lab elsewhere
  with a new, empty one. Each lab is pinned (``node.id==``) to the node that holds its work; the node is
  kept in the spawner's state (the hub's database), so the next start goes back there.
- **No IPVS, so no virtual IP and no ingress mesh** on kernels without it ("No route to host"): endpoint
  mode ``dnsrr``, and the lab's port published in ``host`` mode on its node; the proxy reaches the node's
  address at that port.
- **``prepared`` counted as stopped** by ``poll()``: the hub drops the route and leaves an orphan service.
  Only a task's final states count as stopped here.
- **A rejected task waits for the spawn's timeout** (an image missing on the node): the spawn fails at
  once, with the engine's reason.
- **A cancelled spawn leaves its service behind**: the service is removed when a spawn fails or is
  cancelled, and ``stop()`` removes it by name even when the spawn never learned its id. A cancel queues the
  removal without waiting for it: the hub refuses to stop a spawn still pending (HTTP 500 to the teacher's
  cancel), and the removal may wait behind a create still in flight.
- Swarm would restart a lab that exits, on its own: restart condition ``none``, as a container.
- **A task stuck "running" on a node that is down**: Swarm marks it to shut down, but no engine is there to
  report it, so its last state stays ``running``; ``poll()`` reads the task's desired state too.
- **A lab that ended leaves its service behind** (the hub calls ``stop()`` only on a lab it thinks runs): the
  service left is removed at the next start, which would otherwise reuse its spec (and its old node).
- **No work lost with a node** (labkit issue 51): a lab that ends because its node is drained, down or gone
  says so in the spawner's state (``lost_with_node``), which the board reads to start it again when the node
  returns; a start with ``user_options`` ``{"rehome_to": NODE_ID}`` (`labkit room rehome`) moves the lab to
  that node, only while its own node is not ready (a participant cannot leave their work behind by mistake).
"""

from __future__ import annotations

import asyncio
from typing import Any

from docker.errors import APIError, NotFound
from docker.types import Mount, RestartPolicy
from dockerspawner import SwarmSpawner
from traitlets import Dict, Int, Unicode

from .swarm_nodes import USABLE, node_state

RUNNING_STATES = {"new", "allocated", "pending", "assigned", "accepted", "preparing", "prepared", "ready", "starting"}
FAILED_STATES = {"rejected", "failed", "orphaned"}


class RoomSwarmSpawner(SwarmSpawner):
    """A participant's lab as a Swarm service on the worker holding their work (see the module's docstring)."""

    placement = Dict(
        config=True, help="login -> the swarm node id of a participant's first start (`room up` spreads them)"
    )
    work_labels = Dict(config=True, help="labels of the work volume when Swarm creates it on its node")
    shm_bytes = Int(512 * 1024**2, config=True, help="size of the lab's /dev/shm (a tmpfs mount)")
    node_id = Unicode("", help="the node holding this lab's work volume (kept in the spawner's state)")
    lost_with_node = Unicode("", help="why the lab ended with its node (drained, down, gone); kept in the state")
    _removal: asyncio.Future[None] | None = None  # a cancelled spawn's removal of its service, under way

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.node_id = state.get("node_id", "") or self.node_id
        self.lost_with_node = state.get("lost_with_node", "") or self.lost_with_node

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state()
        if self.node_id:
            state["node_id"] = self.node_id
        if self.lost_with_node:
            state["lost_with_node"] = self.lost_with_node
        return state

    def clear_state(self) -> None:
        # the work stays on its node after the lab stops: so do the lab's place, and why it ended
        node, lost = self.node_id, self.lost_with_node
        super().clear_state()
        self.node_id, self.lost_with_node = node, lost

    async def _node_state(self, node_id: str) -> str:
        try:
            return node_state(await self.docker("inspect_node", node_id))
        except NotFound:
            return "gone"

    async def _rehome(self) -> None:
        """`labkit room rehome`'s start: the lab moves to ``rehome_to`` when its own node is not ready."""
        target = str((self.user_options or {}).get("rehome_to") or "")
        if not target or target == self.node_id:
            return
        if self.node_id and await self._node_state(self.node_id) == USABLE:
            raise RuntimeError(f"{self.user.name}'s work is on node {self.node_id}, which is ready: not moved")
        if await self._node_state(target) != USABLE:
            raise RuntimeError(f"node {target} is not ready and active: {self.user.name}'s lab cannot move there")
        self.log.warning("%s's lab moves from node %s to %s", self.user.name, self.node_id or "-", target)
        self.node_id, self.lost_with_node = target, ""

    @property
    def mounts(self) -> list[Mount]:
        # dockerspawner#536: SwarmSpawner mounts named volumes as binds
        labels = self._render_templates(self.work_labels)
        work = [
            Mount(target=vol["bind"], source=name, type="volume", read_only=vol["mode"] == "ro", labels=labels)
            for name, vol in self.volume_binds.items()
        ]
        return [*work, Mount(target="/dev/shm", source=None, type="tmpfs", tmpfs_size=self.shm_bytes)]

    async def _pick_node(self) -> str:
        """The node of this lab: where its work is, else `room up`'s placement, else the worker with fewest labs."""
        if not self.node_id:
            self.node_id = self.placement.get(self.user.name, "")
        if not self.node_id:
            nodes = await self.docker("nodes", filters={"role": "worker"})
            ready = [n["ID"] for n in nodes if node_state(n) == USABLE]
            tasks = await self.docker("tasks", filters={"desired-state": "running"})
            load = {node: sum(t.get("NodeID") == node for t in tasks) for node in ready}
            self.node_id = min(sorted(load), key=load.__getitem__) if load else ""
        return self.node_id

    async def create_object(self) -> Any:
        node = await self._pick_node()
        self.extra_placement_spec = {"constraints": ["node.role==worker", *([f"node.id=={node}"] if node else [])]}
        # no IPVS: no virtual IP, no ingress mesh; the port is published on the lab's own node
        self.extra_endpoint_spec = {"mode": "dnsrr", "ports": {None: (self.port, "tcp", "host")}}
        self.extra_task_spec = {"restart_policy": RestartPolicy(condition="none")}
        # SwarmSpawner passes extra_create_kwargs as they are: the labels' {raw_username} stays unfilled
        self.extra_create_kwargs = self._render_templates(self.extra_create_kwargs)  # type: ignore[has-type]
        # the lab's container carries the room's labels too, as on one engine (a node's clean-up finds it)
        self.extra_container_spec = {"labels": self.extra_create_kwargs.get("labels", {})}
        return await super().create_object()

    async def poll(self) -> int | None | str:
        # SwarmSpawner counts a task still being prepared as stopped: the hub drops the route, the service stays
        task = await self.get_task()
        state = task["Status"]["State"] if task else ""
        if (
            task
            and task.get("DesiredState") in ("running", "ready")
            and (state in RUNNING_STATES or state == "running")
        ):
            return None
        if self.node_id and self.object_id:  # a lab that ran ended (a cancelled spawn's service is gone): why
            lost = await self._node_state(self.node_id)
            self.lost_with_node = "" if lost == USABLE else lost
        return f"task {state}" if task else 0

    async def start_object(self) -> None:
        # A rejected task (an image missing on the node) would be waited for until the spawn's timeout
        delay = 0.5
        while True:
            task = await self.get_task()
            if not task:
                raise RuntimeError(f"Service {self.service_name} not found")
            status = task["Status"]
            if status["State"] == "running":
                return
            if status["State"] in FAILED_STATES or task.get("DesiredState") == "shutdown":
                raise RuntimeError(
                    f"Swarm could not start {self.service_name} on its node: {status.get('Err') or status['State']}"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 5)

    async def start(self) -> Any:
        try:
            await self._remove_service()  # one left by a lab that ended
            await self._rehome()
            found = await super().start()
        except asyncio.CancelledError:
            # The hub stops a cancelled spawn a second later, and refuses that stop (HTTP 500) while the spawn is
            # still pending: the removal is queued (after a create in flight) and the cancel ends at once.
            self._removal = asyncio.ensure_future(self._remove_service())
            self._removal.add_done_callback(self._removed)
            raise
        except Exception:
            await asyncio.shield(self._remove_service())  # a failed spawn leaves no service
            raise
        self.lost_with_node = ""
        return found

    def _removed(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error("could not remove %s after its spawn was cancelled: %s", self.service_name, task.exception())

    async def stop(self, now: bool = False) -> None:
        await self._remove_service()
        self.clear_state()

    async def _remove_service(self) -> None:
        """Remove this lab's service, found by name (a spawn cancelled mid-create never learned its id).
        DockerSpawner makes every engine call on one thread, in order: a removal asked for while the create is
        in flight runs after it, and finds the service."""
        try:
            await self.docker("remove_service", self.service_name)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 404:
                raise
        self.object_id = ""

    async def get_ip_and_port(self) -> tuple[str, int]:
        # the lab's port is published in host mode on its node (no ingress mesh): that node's address
        task = await self.get_task()
        if not task:
            raise RuntimeError(f"Service {self.service_name} has no task")
        node = await self.docker("inspect_node", task["NodeID"])
        for port in (task["Status"].get("PortStatus") or {}).get("Ports") or []:
            if port.get("TargetPort") == self.port and port.get("PublishedPort"):
                return node["Status"]["Addr"], int(port["PublishedPort"])
        raise RuntimeError(f"Service {self.service_name} publishes no port for {self.port}")
