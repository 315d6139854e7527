"""The daemon's side of its node keepers: calls to them, and why one stopped answering.

Why its own module: every part of the Ray backend (a child's watch, its directory's records,
a door request, the doctor's report, a restart's questions) talks to a node's keeper the same
way, and when the keeper's actor is gone each of them has to give the same verdict — the node
died, taking the child with it, or only the keeper did (its children's lifelines closed with
it). :class:`Keepers` is that one way and that one verdict; the handles themselves (found by
name, started on their node) are :class:`roost.backends.ray.cluster.RayCluster`'s.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from ray.exceptions import RayActorError, RayError

from roost.backends.base import BackendError, NodeRef
from roost.backends.ray.cluster import RayCluster
from roost.system.blocking import BlockingExecutor

__all__ = [
    "KEEPER_PROBE_SECS",
    "NODE_DIED_MARKS",
    "Keepers",
    "cause",
    "keeper_gone_sentence",
    "node_gone_sentence",
    "one_line",
]

log = structlog.get_logger("roost.ray")

NODE_DIED_MARKS = ("the actor's node was", "because its node has died")
"""In Ray's ``ActorDiedError`` text when the GCS ended the actor with its node (not on its own)."""

KEEPER_PROBE_SECS = 60.0
"""How long a fresh keeper may take to answer on a node whose keeper died (a Ray worker's start
on a busy node; a dead node's GCS health checks fail well within it)."""


def node_gone_sentence(node: NodeRef) -> str:
    where = f" at {node.address}" if node.address else ""
    return f"the Ray node {node.node_id}{where} died, taking the child with it"


def keeper_gone_sentence(node: NodeRef) -> str:
    return f"the node keeper on Ray node {node.node_id} died, and the child's lifeline closed with it"


def cause(exc: BaseException) -> str:
    """One line from a Ray error (the remote exception's own message when there is one)."""
    inner = getattr(exc, "cause", None)
    if isinstance(inner, BaseException):
        return one_line(inner)
    return one_line(exc)


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:300]


class Keepers:
    """Calls to the node keepers of one cluster, and the verdict when one is gone."""

    def __init__(self, cluster: RayCluster, executor: BlockingExecutor) -> None:
        self.cluster = cluster
        self.executor = executor
        self._calls: set[asyncio.Task[Any]] = set()

    async def call(self, method: Any, *args: Any) -> Any:
        """An actor call, submitted from the executor, its result awaited on the loop.

        Submitting one costs about a millisecond of Python (argument binding, pickling); when a
        storm of children ends at once, hundreds of those in one loop turn would stall it. In
        the executor they run beside the loop, which keeps answering."""
        ref = await self.executor.run(method.remote, *args)
        return await ref

    def submit(self, method: Any, *args: Any) -> None:
        """Fire and forget (a signal, a lifeline to close); a failure is only logged."""
        task = asyncio.get_running_loop().create_task(self.call(method, *args))
        self._calls.add(task)
        task.add_done_callback(self._call_done)

    def _call_done(self, task: asyncio.Task[Any]) -> None:
        self._calls.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("ray_call_failed", error=cause(task.exception() or RuntimeError()))

    async def at(self, node: NodeRef) -> Any:
        """The node's keeper (started there if need be); :class:`BackendError` for a node seen dead."""
        if self.cluster.is_dead(node.node_id):
            raise BackendError(node_gone_sentence(node))
        return await self.cluster.keeper(node.node_id)

    async def children(self) -> list[tuple[NodeRef, list[dict[str, Any]]]]:
        """What each keeper already running on a live node remembers of its children (a keeper
        that does not answer is left out)."""
        keepers = await self.cluster.existing_keepers()
        out: list[tuple[NodeRef, list[dict[str, Any]]]] = []
        for node_id, handle in keepers.items():
            view = self.cluster.node(node_id)
            node = NodeRef(node_id, view.address if view else "")
            try:
                out.append((node, list(await self.call(handle.list))))
            except RayError:
                continue
        return out

    async def gone_sentence(self, node: NodeRef, error: RayActorError | None = None) -> str:
        """Why a child's keeper stopped answering: its node died, or only the keeper did.

        Ray's account of the actor's death names the node when the GCS ended the actor with its
        node. But the daemon may hear of the death first from the lost connection, before the
        GCS has missed the node's health checks (its node table lags by those), so otherwise a
        fresh keeper started there decides: one answers on a live node, none on a dead one."""
        self.cluster.forget_keeper(node.node_id)
        if error is not None and any(mark in str(error) for mark in NODE_DIED_MARKS):
            self.cluster.mark_dead(node.node_id, node.address)
            log.info("ray_keeper_gone", node=node.node_id, died="node", known_by="ray")
            return node_gone_sentence(node)
        alive = await self._node_answers(node)
        log.info("ray_keeper_gone", node=node.node_id, died="keeper" if alive else "node", known_by="probe")
        return keeper_gone_sentence(node) if alive else node_gone_sentence(node)

    async def _node_answers(self, node: NodeRef) -> bool:
        """Whether the node runs a keeper now (started again if need be), else whether Ray still
        lists it alive once the probe failed or lapsed."""
        try:
            keeper = await self.at(node)
            await asyncio.wait_for(self.call(keeper.identity), KEEPER_PROBE_SECS)
            return True
        except (RayError, BackendError, TimeoutError):
            self.cluster.forget_keeper(node.node_id)
        try:
            return await self.cluster.node_alive(node.node_id)
        except Exception:
            return False
