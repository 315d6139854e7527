"""Where each Ray job runs: its placement group, its node, and each node's start gate.

Why its own module: a job's node is decided once (its bundle reserved as a placement group, on
the node the bundle landed on) and then asked for by everything else the backend does for the
job — its directory's records, its start, its lifeline, its end — until the job is let go of
and its placement group with it. :class:`Placer` is that decision and that memory; the bundle
and the refusal sentences themselves are pure (roost/backends/ray/placement.py), the placement
group calls are :class:`roost.backends.ray.cluster.RayCluster`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from ray.exceptions import RayError

from roost.backends.base import BackendError, NodeRef, PlacementRefused
from roost.backends.ray.cluster import RayCluster
from roost.backends.ray.keepers import one_line
from roost.backends.ray.placement import Bundle, bundle_for, run_as_refusal
from roost.backends.ray.settings import RaySettings
from roost.core.errors import RoostError
from roost.core.manifest import ResourceCaps

__all__ = ["Placer"]


class Placer:
    """Each job's placement group and node, from its placement to its end."""

    def __init__(self, cluster: RayCluster, live: Callable[[], RaySettings], *, max_starting: int) -> None:
        self.cluster = cluster
        # The placement, the busy wait and the default CPUs are read at each launch (a reload
        # may change them).
        self.live = live
        self.max_starting = max_starting
        self._pgs: dict[str, Any] = {}
        self._node_of: dict[str, NodeRef] = {}
        self._gates: dict[str, asyncio.Semaphore] = {}

    def bundle_of(self, capsule: str, resources: ResourceCaps) -> Bundle:
        """The child's Ray resource request under the placement settings in force now."""
        settings = self.live()
        return bundle_for(resources, settings.placement.get(capsule.split("@", 1)[0]), settings.child_cpus)

    async def place(self, job_id: str, capsule: str, resources: ResourceCaps, uid: int | None) -> NodeRef:
        """The job's bundle reserved on a node (refused at once when no node could ever hold it,
        after ``ray_busy_wait_secs`` when every node that could is busy, or when the node's
        keeper cannot start a child as ``uid``)."""
        bundle = self.bundle_of(capsule, resources)
        try:
            placed = await self.cluster.place(job_id, bundle, self.live().busy_wait_secs)
        except BackendError:
            raise
        except RoostError as exc:
            raise PlacementRefused(exc.message) from None
        except Exception as exc:
            raise PlacementRefused(f"the Ray cluster could not place the child: {one_line(exc)}") from None
        node = NodeRef(placed.node.node_id, placed.node.address)
        if uid is not None:
            why = await self._run_as_refusal(node, uid)
            if why is not None:
                await self.cluster.release(placed.pg)
                raise PlacementRefused(why)
        self._pgs[job_id] = placed.pg
        self._node_of[job_id] = node
        return node

    async def _run_as_refusal(self, node: NodeRef, uid: int) -> str | None:
        """The sentence when the node's keeper cannot start a child as ``uid``, before anything
        of the job exists there. A keeper that does not answer now is left to refuse at start."""
        try:
            keeper_uid, can_switch = await self.cluster.keeper_identity(node.node_id)
        except (RayError, BackendError):
            return None
        return run_as_refusal(node.node_id, uid, keeper_uid, can_switch)

    def start_gate(self, node: NodeRef | None) -> asyncio.Semaphore:
        """How many children may be starting at once, on each node on its own."""
        key = node.node_id if node is not None else ""
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = asyncio.Semaphore(self.max_starting)
        return gate

    def node(self, node: NodeRef | None, job_id: str) -> NodeRef:
        """The job's node: the one its record names, else the one it was placed on."""
        found = node or self._node_of.get(job_id)
        if found is None:
            raise BackendError(f"the job {job_id} has no Ray node recorded")
        return found

    def node_of(self, job_id: str) -> NodeRef | None:
        return self._node_of.get(job_id)

    def remember(self, job_id: str, node: NodeRef, *, keep_known: bool = False) -> None:
        """The job runs on ``node`` (learnt at a start, or from a keeper after a restart);
        ``keep_known`` leaves a node already recorded for the job as it is."""
        if keep_known:
            self._node_of.setdefault(job_id, node)
        else:
            self._node_of[job_id] = node

    async def let_go(self, job_id: str) -> None:
        """The job is over: its node is forgotten and its placement group removed (looked up by
        name when this daemon did not place it itself)."""
        self._node_of.pop(job_id, None)
        pg = self._pgs.pop(job_id, None)
        if pg is not None:
            await self.cluster.release(pg)
        else:
            with contextlib.suppress(Exception):
                await self.cluster.release_job(job_id)

    async def release_all(self) -> None:
        """Every placement group this daemon holds, removed (at close)."""
        for job_id in list(self._pgs):
            await self.cluster.release(self._pgs.pop(job_id))
