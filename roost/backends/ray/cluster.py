"""The daemon's connection to a Ray cluster: nodes, keepers, and one placement group per child.

Why it looks like this:

* ``ray.init`` blocks (it starts an embedded head, or dials the cluster's GCS), so it runs in
  the daemon's executor; a cluster that is unreachable at start-up is retried in the background
  with backoff, and every launch until then is refused with a sentence (:meth:`RayCluster.require`).
* Everything the event loop waits for is an ``ObjectRef`` (they are awaitable): an actor call,
  a placement group's ``ready()``. Calls that are plain blocking GCS reads (``ray.nodes()``,
  ``placement_group_table``, ``remove_placement_group``, ``ray.get_actor``) go to the executor.
* A child's reservation is a placement group with one bundle (``STRICT_PACK``), created
  ``detached`` and named after the job, so it is honest accounting for the child's whole life
  (no Ray worker holds it), survives a daemon crash, and is found and removed by the next daemon.
* A node's keeper is a detached named actor (``roost-keeper-<node id>``) pinned to its node with
  ``NodeAffinitySchedulingStrategy(soft=False)`` and ``num_cpus=0``; the first daemon that needs
  a node starts it, later daemons find it by name (roost/backends/ray/node/keeper.py).
* Nothing here may reach Ray before this daemon's own ``ray.init`` succeeded: Ray's public
  calls otherwise run a bare ``ray.init()`` of their own, which joins whatever cluster
  ``RAY_ADDRESS`` or the machine's last ``ray start`` names, or starts one. The package turns that
  off (``RAY_ENABLE_AUTO_CONNECT=0``, roost/backends/ray/__init__.py), and every method that would
  talk to the cluster raises :class:`BackendError` while it is not connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

import ray
import structlog
from ray.util.placement_group import (
    PlacementGroup,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from roost.backends.base import BackendError
from roost.backends.ray.node.keeper import NodeKeeper
from roost.backends.ray.placement import Bundle, NodeView, busy_sentence, infeasible_sentence, keeper_name
from roost.core.errors import Refused
from roost.system.blocking import BlockingExecutor

__all__ = ["Placed", "RayCluster", "pg_name", "start_keeper"]

log = structlog.get_logger("roost.ray")

PG_PREFIX = "roost-job-"
_NODES_TTL = 2.0


def pg_name(job_id: str) -> str:
    return PG_PREFIX + job_id


@dataclass(frozen=True, slots=True)
class Placed:
    """A child's reservation: its placement group and the node it landed on."""

    pg: PlacementGroup
    node: NodeView


class RayCluster:
    """One daemon's view of its Ray cluster. Every method runs on the event loop."""

    def __init__(
        self,
        executor: BlockingExecutor,
        *,
        address: str | None,
        namespace: str,
        node_root: str,
        job_cgroups: str,
    ) -> None:
        self.executor = executor
        self.address = address
        self.namespace = namespace
        self.node_root = node_root
        self.job_cgroups = job_cgroups
        self.connected = False
        self.last_error: str | None = None
        self._nodes: list[NodeView] = []
        self._dead: dict[str, NodeView] = {}
        self._nodes_at = 0.0
        self._keepers: dict[str, Any] = {}
        self._identity: dict[str, tuple[int, bool]] = {}
        self._connector: asyncio.Task[None] | None = None
        self._owns_init = False
        self._reached = asyncio.Event()

    # -- connection ------------------------------------------------------------------------
    async def start(self, first_try_secs: float = 60.0) -> None:
        """Connect now if the cluster answers; else keep trying in the background."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._try_connect()), first_try_secs)
        if not self.connected:
            self._connector = asyncio.get_running_loop().create_task(self._keep_trying())

    async def _try_connect(self) -> None:
        try:
            await self.executor.run(self._init)
        except Exception as exc:
            self.last_error = _one_line(exc)
            log.warning("ray_unreachable", address=self.address or "embedded", error=self.last_error)
            return
        self.connected = True
        self.last_error = None
        await self.refresh_nodes(force=True)
        self._reached.set()
        log.info("ray_connected", address=self.address or "embedded", nodes=len(self._nodes))

    async def wait_connected(self) -> None:
        """Return once this daemon is connected (at once when it already is)."""
        await self._reached.wait()

    def _init(self) -> None:
        if ray.is_initialized():
            return  # this process is already a driver of a cluster (a test harness, an embedding)
        if self.address is not None and self.address != "auto":
            # ray.init keeps retrying an unreachable GCS for minutes; a plain connect says at once.
            _probe(self.address)
        kwargs: dict[str, Any] = {
            "namespace": self.namespace,
            "logging_level": "warning",
            "log_to_driver": False,
            "configure_logging": False,
        }
        if self.address is None:
            # "local" always starts a Ray of the daemon's own: with no address, ray.init would join
            # whatever RAY_ADDRESS or the machine's last `ray start` (/tmp/ray/ray_current_cluster)
            # names, so the daemon would place children on someone else's cluster and, at stop,
            # leave its keepers there.
            kwargs["address"] = "local"
            kwargs["include_dashboard"] = False
        else:
            kwargs["address"] = self.address
        ray.init(**kwargs)
        self._owns_init = True

    async def _keep_trying(self) -> None:
        delay = 1.0
        while not self.connected:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
            await self._try_connect()

    async def stop(self) -> None:
        if self._connector is not None:
            self._connector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connector
        if self.connected and self._owns_init:
            await self.executor.run(ray.shutdown)
        self.connected = False

    def unreachable_sentence(self) -> str | None:
        """Why launches are refused now (None once the cluster answered)."""
        if self.connected:
            return None
        where = self.address or "embedded"
        why = f": {self.last_error}" if self.last_error else ""
        return (
            f"the Ray cluster ({where}) is not reachable yet{why}; the daemon keeps retrying, "
            "and launches are refused until it answers"
        )

    def require(self) -> None:
        """Refuse a launch while the cluster is not reachable (one sentence)."""
        why = self.unreachable_sentence()
        if why is not None:
            raise Refused(why)

    def _connected(self) -> None:
        """Raise :class:`BackendError` unless connected: no call may reach Ray before that."""
        why = self.unreachable_sentence()
        if why is not None:
            raise BackendError(why)

    # -- nodes -----------------------------------------------------------------------------
    async def refresh_nodes(self, *, force: bool = False) -> list[NodeView]:
        self._connected()
        if force or time.monotonic() - self._nodes_at > _NODES_TTL:
            raw: list[dict[str, Any]] = await self.executor.run(ray.nodes)
            alive: list[NodeView] = []
            for n in raw:
                view = NodeView(
                    node_id=str(n["NodeID"]),
                    address=str(n.get("NodeManagerAddress", "")),
                    totals={k: float(v) for k, v in (n.get("Resources") or {}).items()},
                    labels={str(k): str(v) for k, v in (n.get("Labels") or {}).items()},
                )
                if n.get("Alive"):
                    alive.append(view)
                else:
                    self._dead[view.node_id] = view
            self._nodes = alive
            self._nodes_at = time.monotonic()
        return self._nodes

    def node(self, node_id: str) -> NodeView | None:
        for n in self._nodes:
            if n.node_id == node_id:
                return n
        return self._dead.get(node_id)

    async def node_alive(self, node_id: str) -> bool:
        nodes = await self.refresh_nodes(force=True)
        return any(n.node_id == node_id for n in nodes)

    # -- keepers ---------------------------------------------------------------------------
    async def keeper(self, node_id: str) -> Any:
        """The node's keeper actor handle: found by name, else started there (detached)."""
        self._connected()
        handle = self._keepers.get(node_id)
        if handle is not None:
            return handle
        handle = await self.executor.run(self._get_or_create_keeper, node_id)
        self._keepers[node_id] = handle
        return handle

    def mark_dead(self, node_id: str, address: str) -> None:
        """Ray said the node died (an actor's death cause) before its node table caught up."""
        if node_id not in self._dead:
            self._dead[node_id] = self.node(node_id) or NodeView(node_id=node_id, address=address, totals={})
        self._nodes = [n for n in self._nodes if n.node_id != node_id]

    def is_dead(self, node_id: str) -> bool:
        """Whether the node was seen dead (a dead node never comes back under the same id)."""
        return node_id in self._dead

    async def find_keeper(self, node_id: str) -> Any:
        """The node's running keeper, or None — never starts one (reconcile only asks)."""
        self._connected()
        handle = self._keepers.get(node_id)
        if handle is None:
            handle = await self.executor.run(self._find_keeper, node_id)
            if handle is not None:
                self._keepers[node_id] = handle
        return handle

    def cached_keeper(self, node_id: str) -> Any:
        """The handle already known for the node, or None (never a blocking lookup)."""
        return self._keepers.get(node_id)

    def forget_keeper(self, node_id: str) -> None:
        self._keepers.pop(node_id, None)
        self._identity.pop(node_id, None)

    def _get_or_create_keeper(self, node_id: str) -> Any:
        return start_keeper(node_id, self.namespace, self.node_root, self.job_cgroups)

    async def keeper_identity(self, node_id: str) -> tuple[int, bool]:
        """The uid the node's keeper runs as, and whether it can start children as other uids
        (asked once per keeper; a keeper that is started again is asked again)."""
        known = self._identity.get(node_id)
        if known is None:
            handle = await self.keeper(node_id)
            ref = await self.executor.run(handle.identity.remote)
            raw = await ref
            known = self._identity[node_id] = (int(raw["uid"]), bool(raw["can_switch"]))
        return known

    async def existing_keepers(self) -> dict[str, Any]:
        """Keepers already running on live nodes (reconcile asks each what still runs)."""
        nodes = await self.refresh_nodes(force=True)
        out: dict[str, Any] = {}
        for n in nodes:
            handle = await self.executor.run(self._find_keeper, n.node_id)
            if handle is not None:
                self._keepers[n.node_id] = handle
                out[n.node_id] = handle
        return out

    def _find_keeper(self, node_id: str) -> Any:
        try:
            return ray.get_actor(keeper_name(node_id), namespace=self.namespace)
        except ValueError:
            return None

    # -- placement -------------------------------------------------------------------------
    async def place(self, job_id: str, bundle: Bundle, busy_wait_secs: float) -> Placed:
        """Reserve ``bundle`` for the job: refused at once if infeasible, after the bound if busy."""
        self.require()
        nodes = await self.refresh_nodes()
        why = infeasible_sentence(bundle, nodes)
        if why is not None:
            raise Refused(why, "ray_infeasible")
        pg = await self.executor.run(self._create_pg, job_id, bundle)
        try:
            await asyncio.wait_for(pg.ready(), busy_wait_secs)
        except TimeoutError:
            await self.release(pg)
            raise Refused(busy_sentence(bundle, busy_wait_secs), "ray_busy") from None
        except BaseException:
            await self.release(pg)
            raise
        table = await self.executor.run(placement_group_table, pg)
        node_id = str(table["bundles_to_node_id"][0])
        node = self.node(node_id)
        if node is None:
            await self.refresh_nodes(force=True)
            node = self.node(node_id) or NodeView(node_id=node_id, address="", totals={})
        return Placed(pg=pg, node=node)

    @staticmethod
    def _create_pg(job_id: str, bundle: Bundle) -> PlacementGroup:
        selector = [dict(bundle.labels)] if bundle.labels else None
        kwargs: dict[str, Any] = {"strategy": "STRICT_PACK", "name": pg_name(job_id), "lifetime": "detached"}
        if selector is not None:
            kwargs["bundle_label_selector"] = selector
        pg: PlacementGroup = placement_group([dict(bundle.resources)], **kwargs)
        return pg

    async def release(self, pg: PlacementGroup | None) -> None:
        if pg is None or not self.connected:
            return
        with contextlib.suppress(Exception):
            await self.executor.run(remove_placement_group, pg)

    async def release_job(self, job_id: str) -> bool:
        """Remove the job's placement group by name (after a restart); True when one existed."""
        self._connected()

        def find() -> PlacementGroup | None:
            try:
                pg: PlacementGroup = get_placement_group(pg_name(job_id))
                return pg
            except ValueError:
                return None

        pg = await self.executor.run(find)
        if pg is None:
            return False
        await self.release(pg)
        return True

    async def job_pgs(self) -> list[str]:
        """Job ids of the live placement groups this daemon's namespace holds."""
        self._connected()

        def scan() -> list[str]:
            out: list[str] = []
            for info in placement_group_table().values():
                name = str(info.get("name", ""))
                if name.startswith(PG_PREFIX) and info.get("state") != "REMOVED":
                    out.append(name[len(PG_PREFIX) :])
            return out

        return list(await self.executor.run(scan))


def start_keeper(
    node_id: str, namespace: str, node_root: str, job_cgroups: str, runtime_env: dict[str, Any] | None = None
) -> Any:
    """Blocking: the node's keeper actor, found by name or started there (detached, no CPU).

    ``runtime_env`` is Ray's own (e.g. a ``py_executable`` wrapper); the daemon passes none."""
    actor = ray.remote(NodeKeeper)
    options: dict[str, Any] = {
        "name": keeper_name(node_id),
        "namespace": namespace,
        "lifetime": "detached",
        "get_if_exists": True,
        "num_cpus": 0,
        "max_concurrency": 100_000,
        "max_restarts": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
    }
    if runtime_env is not None:
        options["runtime_env"] = runtime_env
    return actor.options(**options).remote(node_id, node_root, job_cgroups)


def _probe(address: str, timeout: float = 3.0) -> None:
    """Raise ``OSError`` unless something accepts TCP connections at ``host:port``."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise OSError(f"ray_address {address!r} is not host:port")
    with socket.create_connection((host, int(port)), timeout=timeout):
        pass


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
