"""``RayBackend``: the process backend that places each child on a Ray cluster node.

The launcher's whole job lifecycle stays as it is (roost/backends/base.py states the
contract); this backend only decides *where* and does the process and directory work through
the node's keeper actor (roost/backends/ray/node/keeper.py):

1. :meth:`RayBackend.place` turns the manifest's resources plus the operator's per-capsule
   placement into one bundle and reserves it as a placement group (refused at once when no node
   could ever hold it, after ``ray_busy_wait_secs`` when every node that could is busy); the
   node the bundle landed on is the child's node (roost/backends/ray/placer.py).
2. The keeper on that node prepares the child's directory under its own root
   (roost/backends/ray/childdirs.py), caches the artifact (fetched from the daemon by sha256,
   roost/backends/ray/nodeartifacts.py), and starts the child as a plain process.
3. The daemon waits on the keeper (``wait_ready``, ``wait_exit`` are awaited ObjectRefs,
   roost/backends/ray/child.py); a keeper that dies fails those calls, and the child's exit
   sentence then names the node (roost/backends/ray/keepers.py).
4. At the child's end the keeper finishes off its leftovers and the placement group is removed.

This module composes those parts into the one :class:`ProcessBackend` and does what is the
backend's own: a child's start, its lifeline and its end, and what a restart asks of the
keepers (what still runs, what is left over, what to end).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from ray.exceptions import RayActorError, RayError

from roost.backends.base import (
    BackendError,
    CannotRunAs,
    ChildDir,
    ChildRef,
    LimitsRefused,
    NodeRef,
    RunningChild,
    StartFailed,
    StartSpec,
)
from roost.backends.ray.child import RayChild
from roost.backends.ray.childdirs import RayChildDirs
from roost.backends.ray.cluster import RayCluster
from roost.backends.ray.clusterreport import cluster_report, node_commands
from roost.backends.ray.doorcalls import KeeperDoorCaller
from roost.backends.ray.keepers import Keepers, cause
from roost.backends.ray.node.keeper import PYTHON_MARK
from roost.backends.ray.nodeartifacts import NodeArtifacts
from roost.backends.ray.placement import Bundle
from roost.backends.ray.placer import Placer
from roost.backends.ray.settings import RaySettings
from roost.core.manifest import ResourceCaps
from roost.services.completionfile import CompletionRecord
from roost.state.config import Config
from roost.system.blocking import BlockingExecutor

__all__ = ["RayBackend"]

log = structlog.get_logger("roost.ray")


class RayBackend:
    """Children on a Ray cluster (``launcher = "ray"``)."""

    def __init__(
        self,
        config: Config,
        executor: BlockingExecutor,
        *,
        daemon_url: Callable[[], str] | None = None,
        keeper_token: Callable[[str], str] | None = None,
        live: Callable[[], Config] | None = None,
    ) -> None:
        self.config = config
        # What a reload may change (the placement, the busy wait, the default CPUs) is read from
        # the configuration in force at each launch; the cluster's address, namespace and node
        # root are restart-only (roost/state/settings.py) and taken from ``config`` once.
        self.live = live or (lambda: config)
        self.executor = executor
        # The daemon's URL as other nodes reach it (advertise_url): a child's MURMUR_ROOST_URL.
        self.daemon_url = daemon_url
        ray = RaySettings.of(config)
        self.cluster = RayCluster(
            executor,
            address=ray.address,
            namespace=ray.namespace,
            node_root=str(ray.node_root),
            job_cgroups=config.job_cgroups,
        )
        self.keepers = Keepers(self.cluster, executor)
        self.placer = Placer(self.cluster, lambda: RaySettings.of(self.live()), max_starting=config.max_starting or 8)
        self.dirs = RayChildDirs(self.keepers, self.placer, executor, config.state_dir / "ray-lost")
        self.artifacts = NodeArtifacts(
            self.keepers, executor, config.registry_path, daemon_url=daemon_url, keeper_token=keeper_token
        )
        self.doors = KeeperDoorCaller(self.keepers)
        self._children: dict[str, RayChild] = {}

    # -- calls to keepers, for the peer plane's file work (roost/backends/ray/peerfiles.py) ---------
    async def call(self, method: Any, *args: Any) -> Any:
        """An actor call, submitted from the executor, its result awaited on the loop."""
        return await self.keepers.call(method, *args)

    async def keeper_at(self, node: NodeRef) -> Any:
        """The node's keeper for another service's calls (the peer plane's file work); raises
        :class:`BackendError` for a node seen dead."""
        return await self.keepers.at(node)

    # -- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        await self.cluster.start(first_try_secs=30.0)

    @property
    def reachable(self) -> bool:
        return self.cluster.connected

    async def wait_reachable(self) -> None:
        await self.cluster.wait_connected()

    def unreachable_sentence(self) -> str | None:
        return self.cluster.unreachable_sentence()

    async def close(self) -> None:
        await self.placer.release_all()
        await self.cluster.stop()

    @property
    def containment(self) -> str | None:
        where = self.cluster.address or "an embedded local cluster"
        return f"Ray ({where}): each node keeper's cgroups, else its sweep by mark"

    async def report(self) -> dict[str, Any]:
        """The cluster and each node as ``roostctl doctor`` checks them (``GET /cluster``)."""
        return await cluster_report(self.keepers, node_commands(self.live()))

    # -- placement ---------------------------------------------------------------------------
    def bundle_of(self, capsule: str, resources: ResourceCaps) -> Bundle:
        """The child's Ray resource request under the placement settings in force now."""
        return self.placer.bundle_of(capsule, resources)

    async def place(self, job_id: str, capsule: str, resources: ResourceCaps, uid: int | None) -> NodeRef | None:
        return await self.placer.place(job_id, capsule, resources, uid)

    def start_gate(self, node: NodeRef | None) -> asyncio.Semaphore:
        return self.placer.start_gate(node)

    # -- the child directory -------------------------------------------------------------------
    async def prepare_dir(self, dir: ChildDir, task: dict[str, str | None] | None, *, fresh: bool) -> ChildDir:
        return await self.dirs.prepare_dir(dir, task)

    async def read_completion(self, dir: ChildDir) -> CompletionRecord | None:
        return await self.dirs.read_completion(dir)

    async def write_completion(self, dir: ChildDir, rec: CompletionRecord) -> None:
        await self.dirs.write_completion(dir, rec)

    async def stderr_tail(self, dir: ChildDir) -> list[str]:
        return await self.dirs.stderr_tail(dir)

    async def own_session_end(self, dir: ChildDir, session_id: str) -> str | None:
        return await self.dirs.own_session_end(dir, session_id)

    async def append_log(self, dir: ChildDir, lines: Sequence[str]) -> None:
        await self.dirs.append_log(dir, lines)

    async def read_log(self, dir: ChildDir, offset: int) -> bytes:
        """The child's log from ``offset`` (``roostctl logs -f`` for a remote child)."""
        return await self.dirs.read_log(dir, offset)

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        return await self.dirs.append_trace(dir, session_id, lines)

    async def read_file(self, dir: ChildDir, name: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        return await self.dirs.read_file(dir, name, offset, max_bytes)

    async def list_files(self, dir: ChildDir, sub: str) -> list[str]:
        return await self.dirs.list_files(dir, sub)

    async def check_workdir(self, dir: ChildDir, workdir: str, uid: int | None) -> str:
        return await self.dirs.check_workdir(dir, workdir, uid)

    # -- children ----------------------------------------------------------------------------
    def check_run_as(self, uid: int | None) -> None:
        """Whether a uid can be switched to is the node keeper's to say (at start)."""
        return None

    async def start(self, spec: StartSpec) -> RayChild:
        node = self.placer.node(spec.dir.node, spec.dir.job_id)
        argv = list(spec.argv)
        if argv and argv[0] == sys.executable:
            argv[0] = PYTHON_MARK  # the node's own interpreter, not this host's path
        env = dict(spec.env)
        env.pop("MURMUR_SPAWNER_LIFELINE", None)  # the keeper sets it: the descriptor is its own
        if self.daemon_url is not None:
            env["MURMUR_ROOST_URL"] = self.daemon_url()  # as the child's node reaches the daemon
        try:
            keeper = await self.keepers.at(node)
            await self.artifacts.ensure(keeper, node, spec.capsule, await self.artifacts.sha256_of(spec))
            started = await self.keepers.call(
                keeper.start,
                spec.dir.job_id,
                argv,
                env,
                spec.uid,
                spec.resources.model_dump(),
                spec.stdin,
                not spec.limits_in_child,
                spec.containment,
                spec.limits_mode,
                spec.capsule,
            )
        except RayActorError as exc:
            raise StartFailed(await self.keepers.gone_sentence(node, exc)) from None
        except RayError as exc:
            inner = getattr(exc, "cause", None)
            if isinstance(inner, LimitsRefused):
                # The node's keeper applied the limits policy there: a limit it cannot enforce.
                raise LimitsRefused(str(inner)) from None
            why = cause(exc)
            if "cannot start a child as uid" in why:
                raise CannotRunAs(why) from None
            raise StartFailed(f"{argv[0] if argv else '?'} on Ray node {node.node_id}: {why}") from None
        except (OSError, ValueError) as exc:
            raise StartFailed(f"the artifact {spec.capsule}: {getattr(exc, 'strerror', None) or exc}") from None
        ref = ChildRef(spec.dir.job_id, int(started["pid"]), started.get("start"), node)
        self.placer.remember(spec.dir.job_id, node)
        child = RayChild(self.keepers, keeper, ref, ready_bound=self.config.launch_timeout_secs + 60)
        self._children[spec.dir.job_id] = child
        return child

    def lifeline_close(self, job_id: str) -> None:
        node = self.placer.node_of(job_id)
        child = self._children.get(job_id)
        if node is None or (child is not None and not child.alive):
            return  # the keeper closed it itself when the child exited
        handle = self.cluster.cached_keeper(node.node_id)
        if handle is not None:
            self.keepers.submit(handle.close_lifeline, job_id)

    async def held_lifelines(self) -> set[str]:
        held: set[str] = set()
        for _node, children in await self.keepers.children():
            held.update(c["job_id"] for c in children if c.get("lifeline"))
        return held

    async def finish_off(self, job_id: str, pid: int | None) -> None:
        node = self.placer.node_of(job_id)
        if node is not None:
            try:
                keeper = await self.keepers.at(node)
                left = int(await self.keepers.call(keeper.finish_off, job_id, True))
                if left:
                    log.info("job_leftovers_killed", job_id=job_id, count=left, node=node.node_id)
            except (RayError, BackendError) as exc:
                log.info("ray_finish_off_skipped", job_id=job_id, node=node.node_id, error=cause(exc))
        self._children.pop(job_id, None)
        await self.placer.let_go(job_id)

    # -- after a restart ------------------------------------------------------------------------
    async def is_running(self, ref: ChildRef) -> bool:
        if ref.node is None:
            return False
        # Disconnected, this raises: reconcile waits for the cluster (ReachesLater) rather than
        # count a child it cannot ask about as lost.
        keeper = await self.cluster.find_keeper(ref.node.node_id)
        if keeper is None:
            return False
        try:
            children = await self.keepers.call(keeper.list)
        except RayError:
            self.cluster.forget_keeper(ref.node.node_id)
            return False
        for c in children:
            if c["job_id"] == ref.job_id and c["pid"] == ref.pid:
                self.placer.remember(ref.job_id, ref.node)
                # One that ended while no daemon watched counts as lost, as on one host.
                return c.get("status") is None
        return False

    def adopt(self, ref: ChildRef) -> RayChild:
        assert ref.node is not None
        keeper = self.cluster.cached_keeper(ref.node.node_id)
        if keeper is None:
            raise BackendError(f"no keeper is known for Ray node {ref.node.node_id}")
        self.placer.remember(ref.job_id, ref.node)
        child = RayChild(self.keepers, keeper, ref, ready_bound=0, adopted=True)
        self._children[ref.job_id] = child
        return child

    async def list_running(self, instance: str) -> list[RunningChild]:
        out: list[RunningChild] = []
        for node, children in await self.keepers.children():
            for c in children:
                if c.get("status") is None:
                    self.placer.remember(c["job_id"], node, keep_known=True)
                    out.append(RunningChild(pid=int(c["pid"]), job_id=c["job_id"], pgid=int(c["pid"]), node=node))
        return out

    async def remove_leftovers(self, keep: set[str]) -> int:
        """After a restart: each job not in ``keep`` that a keeper still remembers as ended, or
        that still holds a placement group (a daemon killed while its launch waited for room, or
        before it let go), is let go of. How many jobs had something left."""
        gone: set[str] = set()
        for node, children in await self.keepers.children():
            ended = [c["job_id"] for c in children if c.get("status") is not None and c["job_id"] not in keep]
            keeper = self.cluster.cached_keeper(node.node_id)
            for job_id in ended:
                with contextlib.suppress(RayError):
                    await self.keepers.call(keeper.finish_off, job_id, True)
                    gone.add(job_id)
        for job_id in await self.cluster.job_pgs():
            if job_id not in keep and await self.cluster.release_job(job_id):
                gone.add(job_id)
        if gone:
            log.info("ray_leftovers_removed", count=len(gone))
        return len(gone)

    async def end_orphan(self, found: RunningChild) -> None:
        node = found.node or self.placer.node_of(found.job_id)
        if node is None:
            return
        with contextlib.suppress(Exception):
            keeper = await self.keepers.at(node)
            await self.keepers.call(keeper.stop, found.job_id, 0.5)
            await self.keepers.call(keeper.finish_off, found.job_id, True)
        with contextlib.suppress(Exception):
            await self.cluster.release_job(found.job_id)
