"""``RayBackend``: the process backend that places each child on a Ray cluster node.

The launcher's whole job lifecycle stays as it is (roost/launcher/backend.py states the
contract); this backend only decides *where* and does the process and directory work through
the node's keeper actor (roost/raybackend/nodekeeper.py):

1. :meth:`RayBackend.place` turns the manifest's resources plus the operator's per-capsule
   placement into one bundle and reserves it as a placement group (refused at once when no node
   could ever hold it, after ``ray_busy_wait_secs`` when every node that could is busy); the
   node the bundle landed on is the child's node.
2. The keeper on that node prepares the child's directory under its own root, caches the
   artifact (fetched from the daemon by sha256), and starts the child as a plain process.
3. The daemon waits on the keeper (``wait_ready``, ``wait_exit`` are awaited ObjectRefs); a
   keeper that dies fails those calls, and the child's exit sentence then names the node.
4. At the child's end the keeper finishes off its leftovers and the placement group is removed.

A node that dies takes its directories with it: the launcher's record of how such a child ended
(``completion.json``) is then kept by the daemon under ``<state_dir>/ray-lost/<job_id>/`` — the
only record of that delegation, written once like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
import structlog
from ray.exceptions import RayActorError, RayError

from roost import __version__
from roost.blocking import BlockingExecutor
from roost.completion import CompletionRecord, read_completion, write_completion
from roost.config import Config
from roost.errors import Unavailable
from roost.launcher.backend import (
    BackendError,
    CannotRunAs,
    ChildDir,
    ChildDirError,
    ChildRef,
    NodeRef,
    PlacementRefused,
    RunningChild,
    StartFailed,
    StartSpec,
)
from roost.manifest import ResourceCaps
from roost.raybackend.cluster import RayCluster
from roost.raybackend.nodekeeper import PYTHON_MARK
from roost.raybackend.placement import Bundle, bundle_for, run_as_refusal
from roost.workdirs import from_verdict

__all__ = ["RayBackend", "RayChild", "keeper_gone_sentence", "node_gone_sentence"]

log = structlog.get_logger("roost.ray")

NODE_DIED_MARKS = ("the actor's node was", "because its node has died")
"""In Ray's ``ActorDiedError`` text when the GCS ended the actor with its node (not on its own)."""

INFO_SECS = 30.0
"""How long ``roostctl doctor``'s question to one keeper may take (it runs the capsule command
there with ``--version``)."""

KEEPER_PROBE_SECS = 60.0
"""How long a fresh keeper may take to answer on a node whose keeper died (a Ray worker's start
on a busy node; a dead node's GCS health checks fail well within it)."""


def node_gone_sentence(node: NodeRef) -> str:
    where = f" at {node.address}" if node.address else ""
    return f"the Ray node {node.node_id}{where} died, taking the child with it"


def keeper_gone_sentence(node: NodeRef) -> str:
    return f"the node keeper on Ray node {node.node_id} died, and the child's lifeline closed with it"


class RayChild:
    """A child on a Ray node, as the launcher supervises it (a :class:`ChildHandle`)."""

    def __init__(
        self, backend: RayBackend, keeper: Any, ref: ChildRef, *, ready_bound: float, adopted: bool = False
    ) -> None:
        assert ref.node is not None and ref.pid is not None
        self.job_id = ref.job_id
        self.pid = ref.pid
        self.pid_start = ref.pid_start
        self.node: NodeRef | None = ref.node
        self._node = ref.node
        self._backend = backend
        self._keeper = keeper
        self._ready_bound = ready_bound
        self._read_first = not adopted
        loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[str] = loop.create_future()
        self._watch = loop.create_task(self._wait_exit())

    @property
    def exited(self) -> asyncio.Future[str]:
        return self._exited

    @property
    def alive(self) -> bool:
        return not self._exited.done()

    @property
    def ref(self) -> ChildRef:
        return ChildRef(self.job_id, self.pid, self.pid_start, self._node)

    async def _wait_exit(self) -> None:
        try:
            status = str(await self._backend.call(self._keeper.wait_exit, self.job_id))
        except RayActorError as exc:
            status = await self._backend.gone_sentence(self._node, exc)
        except (RayError, KeyError) as exc:
            # The keeper no longer knows the child (it was started again meanwhile).
            status = f"exit status unknown: the node keeper lost track of the child ({type(exc).__name__})"
        if not self._exited.done():
            self._exited.set_result(status)

    async def readline(self) -> bytes:
        """The ready line (the keeper reads it); later stdout lines the keeper logs itself."""
        if not self._read_first:
            return b""
        self._read_first = False
        try:
            line, _why = await self._backend.call(self._keeper.wait_ready, self.job_id, self._ready_bound)
        except RayError:
            return b""
        if line is None:
            return b""
        return str(line).encode("utf-8")

    async def stop(self, grace: float) -> bool:
        if not self.alive:
            return False
        try:
            killed = bool(await self._backend.call(self._keeper.stop, self.job_id, grace))
        except RayError:
            killed = False
        await asyncio.shield(self._exited)
        return killed

    def kill(self) -> None:
        if self.alive:
            self._backend.submit(self._keeper.signal, self.job_id, int(signal.SIGKILL))

    def close(self) -> None:
        if not self._watch.done():
            self._watch.cancel()


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
        # What a reload may change (ray_placement, ray_busy_wait_secs, ray_child_cpus) is read
        # from the configuration in force at each launch; the cluster's address, namespace and
        # node root are restart-only (roost/settings.py) and taken from ``config`` once.
        self.live = live or (lambda: config)
        self.executor = executor
        # The daemon's URL as other nodes reach it (advertise_url), and a node keeper's token for
        # GET /artifacts/{sha256}; without them (a backend used on its own) the daemon sends the bytes.
        self.daemon_url = daemon_url
        self.keeper_token = keeper_token
        root = config.ray_node_root or (config.state_dir / "ray-nodes")
        self.cluster = RayCluster(
            executor,
            address=config.ray_address,
            namespace=config.ray_namespace,
            node_root=str(root),
            job_cgroups=config.job_cgroups,
        )
        self.lost_root = config.state_dir / "ray-lost"
        self._pgs: dict[str, Any] = {}
        self._node_of: dict[str, NodeRef] = {}
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._artifacts: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._children: dict[str, RayChild] = {}
        self._calls: set[asyncio.Task[Any]] = set()

    # -- calls to keepers ----------------------------------------------------------------------
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
            log.info("ray_call_failed", error=_cause(task.exception() or RuntimeError()))

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
        for job_id in list(self._pgs):
            await self.cluster.release(self._pgs.pop(job_id))
        await self.cluster.stop()

    @property
    def containment(self) -> str | None:
        where = self.cluster.address or "an embedded local cluster"
        return f"Ray ({where}): each node keeper's cgroups, else its sweep by mark"

    async def report(self) -> dict[str, Any]:
        """The cluster and each node as ``roostctl doctor`` checks them (``GET /cluster``)."""
        out: dict[str, Any] = {
            "launcher": "ray",
            "address": self.cluster.address or "embedded",
            "namespace": self.cluster.namespace,
            "connected": self.cluster.connected,
            "error": self.cluster.last_error,
            "version": __version__,
            "nodes": [],
        }
        if not self.cluster.connected:
            return out
        try:
            nodes = await self.cluster.refresh_nodes(force=True)
            out["available"] = await self.executor.run(ray.available_resources)
            keepers = await self.cluster.existing_keepers()
        except Exception as exc:
            out["error"] = _one_line(exc)
            return out
        commands = self.node_commands()
        path = os.environ.get("PATH", os.defpath)  # what children get (roost/launcher/spawn.py)

        async def ask(handle: Any) -> dict[str, Any]:
            try:
                return dict(await asyncio.wait_for(self.call(handle.info, commands, path), INFO_SECS))
            except RayError as exc:
                return {"error": _cause(exc)}
            except TimeoutError:
                return {"error": f"no answer in {INFO_SECS:g}s"}

        answers = await asyncio.gather(*(ask(keepers[n.node_id]) for n in nodes if n.node_id in keepers))
        by_node = dict(zip([n.node_id for n in nodes if n.node_id in keepers], answers, strict=True))
        for n in nodes:
            entry: dict[str, Any] = {"node_id": n.node_id, "address": n.address, "totals": dict(n.totals)}
            entry["keeper"] = by_node.get(n.node_id)
            out["nodes"].append(entry)
        return out

    def node_commands(self) -> dict[str, list[str]]:
        """The capsule host's and the runtime's commands as a keeper would start them on its node
        (this host's interpreter becomes the node's own, as in :meth:`start`)."""
        cfg = self.live()
        capsule = list(cfg.capsule_command) or [PYTHON_MARK, "-m", "roost.capsule"]
        if capsule[0] == sys.executable:
            capsule[0] = PYTHON_MARK
        return {"capsule": capsule, "runtime": list(cfg.runtime_command)}

    # -- placement ---------------------------------------------------------------------------
    def bundle_of(self, capsule: str, resources: ResourceCaps) -> Bundle:
        """The child's Ray resource request under the placement settings in force now."""
        cfg = self.live()
        return bundle_for(resources, cfg.ray_placement.get(capsule.split("@", 1)[0]), cfg.ray_child_cpus)

    async def place(self, job_id: str, capsule: str, resources: ResourceCaps, uid: int | None) -> NodeRef | None:
        bundle = self.bundle_of(capsule, resources)
        try:
            placed = await self.cluster.place(job_id, bundle, self.live().ray_busy_wait_secs)
        except BackendError:
            raise
        except Exception as exc:
            from roost.errors import RoostError

            if isinstance(exc, RoostError):
                raise PlacementRefused(exc.message) from None
            raise PlacementRefused(f"the Ray cluster could not place the child: {_one_line(exc)}") from None
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
        key = node.node_id if node is not None else ""
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = asyncio.Semaphore(self.config.max_starting or 8)
        return gate

    def _node(self, node: NodeRef | None, job_id: str) -> NodeRef:
        found = node or self._node_of.get(job_id)
        if found is None:
            raise BackendError(f"the job {job_id} has no Ray node recorded")
        return found

    async def _keeper(self, node: NodeRef) -> Any:
        if self.cluster.is_dead(node.node_id):
            raise BackendError(node_gone_sentence(node))
        return await self.cluster.keeper(node.node_id)

    async def keeper_at(self, node: NodeRef) -> Any:
        """The node's keeper for another service's calls (the peer plane's file work); raises
        :class:`BackendError` for a node seen dead."""
        return await self._keeper(node)

    async def door_request(
        self,
        node: NodeRef,
        job_id: str,
        method: str,
        port: int,
        path: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_secs: float,
    ) -> tuple[int, bytes, str | None]:
        """One HTTP exchange with the door of a child on ``node``, made there by its keeper
        (the door listens on that node's loopback); ``OSError`` with a sentence when it fails."""
        try:
            keeper = await self._keeper(node)
            answer = await self.call(keeper.door_request, job_id, method, port, path, headers, body, timeout_secs)
        except (RayError, BackendError) as exc:
            raise OSError(f"through the keeper of Ray node {node.node_id}: {_cause(exc)}") from None
        if "error" in answer:
            raise OSError(f"on Ray node {node.node_id}: {answer['error']}")
        location = answer.get("location")
        return int(answer["status"]), bytes(answer["body"]), str(location) if location is not None else None

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
            keeper = await self._keeper(node)
            await asyncio.wait_for(self.call(keeper.identity), KEEPER_PROBE_SECS)
            return True
        except (RayError, BackendError, TimeoutError):
            self.cluster.forget_keeper(node.node_id)
        try:
            return await self.cluster.node_alive(node.node_id)
        except Exception:
            return False

    # -- the child directory -------------------------------------------------------------------
    async def prepare_dir(self, dir: ChildDir, task: dict[str, str | None] | None, *, fresh: bool) -> ChildDir:
        node = self._node(dir.node, dir.job_id)
        try:
            keeper = await self._keeper(node)
            workdir = str(await self.call(keeper.prepare, dir.job_id, dir.uid, task))
        except RayError as exc:
            raise ChildDirError(_cause(exc)) from None
        return replace(dir, workdir=workdir, parent_workdir=None, node=node)

    def _lost_dir(self, job_id: str) -> Path:
        return self.lost_root / job_id

    async def read_completion(self, dir: ChildDir) -> CompletionRecord | None:
        local = await self.executor.run(read_completion, self._lost_dir(dir.job_id))
        if local is not None:
            return local
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            raw = await self.call(keeper.read_completion, dir.job_id, dir.uid)
        except (RayError, BackendError):
            return None
        return CompletionRecord.from_dict(raw) if isinstance(raw, dict) else None

    async def write_completion(self, dir: ChildDir, rec: CompletionRecord) -> None:
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            await self.call(keeper.write_completion, dir.job_id, dir.uid, rec.to_dict())
            return
        except (RayError, BackendError) as exc:
            log.warning("ray_completion_kept_locally", job_id=dir.job_id, error=_cause(exc))

        def keep() -> None:
            path = self._lost_dir(dir.job_id)
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_completion(path, rec)

        await self.executor.run(keep)

    async def stderr_tail(self, dir: ChildDir) -> list[str]:
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            return list(await self.call(keeper.stderr_tail, dir.job_id, dir.uid))
        except (RayError, BackendError):
            return []

    async def own_session_end(self, dir: ChildDir, session_id: str) -> str | None:
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            told = await self.call(keeper.own_session_end, dir.job_id, dir.uid, session_id)
        except (RayError, BackendError):
            return None
        return told if isinstance(told, str) else None

    async def append_log(self, dir: ChildDir, lines: Sequence[str]) -> None:
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            await self.call(keeper.append_log, dir.job_id, dir.uid, list(lines))
        except (RayError, BackendError) as exc:
            raise OSError(_cause(exc)) from None

    async def read_log(self, dir: ChildDir, offset: int) -> bytes:
        """The child's log from ``offset`` (``roostctl logs -f`` for a remote child)."""
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            return bytes(await self.call(keeper.read_log, dir.job_id, dir.uid, offset))
        except (RayError, BackendError):
            return b""

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        """The daemon's trace lines for a session on a node, written there by its keeper."""
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            ids = await self.call(keeper.append_trace, dir.job_id, dir.uid, session_id, list(lines))
        except (RayError, BackendError) as exc:
            raise OSError(_cause(exc)) from None
        return [str(i) for i in ids]

    async def read_file(self, dir: ChildDir, name: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            start, data = await self.call(keeper.read_file, dir.job_id, dir.uid, name, offset, max_bytes)
        except (RayError, BackendError, ValueError):
            return 0, b""
        return int(start), bytes(data)

    async def list_files(self, dir: ChildDir, sub: str) -> list[str]:
        try:
            keeper = await self._keeper(self._node(dir.node, dir.job_id))
            return [str(n) for n in await self.call(keeper.list_files, dir.job_id, dir.uid, sub)]
        except (RayError, BackendError, ValueError):
            return []

    async def check_workdir(self, dir: ChildDir, workdir: str, uid: int | None) -> str:
        """Checked by the node's keeper on the node's own disk, where the child runs."""
        node = self._node(dir.node, dir.job_id)
        try:
            keeper = await self._keeper(node)
            verdict = await self.call(keeper.check_workdir, dir.job_id, workdir, uid)
        except (RayError, BackendError) as exc:
            raise Unavailable(
                f"the workdir could not be checked on Ray node {node.node_id}, where the session runs: {_cause(exc)}"
            ) from None
        return from_verdict(verdict)

    # -- children ----------------------------------------------------------------------------
    def check_run_as(self, uid: int | None) -> None:
        """Whether a uid can be switched to is the node keeper's to say (at start)."""
        return None

    async def _ensure_artifact(self, keeper: Any, node: NodeRef, capsule: str, sha256: str) -> None:
        """Once per node and digest (concurrent launches share one fetch): the node's cache has it."""
        key = (node.node_id, sha256)
        task = self._artifacts.get(key)
        if task is None or (task.done() and task.exception() is not None):
            task = asyncio.get_running_loop().create_task(self._put_artifact(keeper, node, capsule, sha256))
            self._artifacts[key] = task
        await asyncio.shield(task)

    async def _put_artifact(self, keeper: Any, node: NodeRef, capsule: str, sha256: str) -> None:
        name, version = capsule.split("@", 1)
        if await self.call(keeper.has_artifact, name, version, sha256):
            return
        if self.daemon_url is not None and self.keeper_token is not None:
            token = self.keeper_token(node.node_id)
            await self.call(keeper.fetch_artifact, name, version, sha256, self.daemon_url(), token)
            return
        from roost.registry import artifact_filename

        path = self.config.registry_path / name / version / artifact_filename(name, version)
        data = await self.executor.run(path.read_bytes)
        await self.call(keeper.put_artifact, name, version, sha256, data)

    async def _sha256(self, spec: StartSpec) -> str:
        if spec.sha256:
            return spec.sha256
        from roost.registry import Registry

        name, version = spec.capsule.split("@", 1)
        artifact = await self.executor.run(Registry(self.config.registry_path).resolve, name, version)
        return artifact.sha256

    async def start(self, spec: StartSpec) -> RayChild:
        node = self._node(spec.dir.node, spec.dir.job_id)
        argv = list(spec.argv)
        if argv and argv[0] == sys.executable:
            argv[0] = PYTHON_MARK  # the node's own interpreter, not this host's path
        env = dict(spec.env)
        env.pop("MURMUR_SPAWNER_LIFELINE", None)  # the keeper sets it: the descriptor is its own
        if self.daemon_url is not None:
            env["MURMUR_ROOST_URL"] = self.daemon_url()  # as the child's node reaches the daemon
        try:
            keeper = await self._keeper(node)
            await self._ensure_artifact(keeper, node, spec.capsule, await self._sha256(spec))
            started = await self.call(
                keeper.start,
                spec.dir.job_id,
                argv,
                env,
                spec.uid,
                spec.resources.model_dump(),
                spec.stdin,
                not spec.limits_in_child,
            )
        except RayActorError as exc:
            raise StartFailed(await self.gone_sentence(node, exc)) from None
        except RayError as exc:
            cause = _cause(exc)
            if "cannot start a child as uid" in cause:
                raise CannotRunAs(cause) from None
            raise StartFailed(f"{argv[0] if argv else '?'} on Ray node {node.node_id}: {cause}") from None
        except (OSError, ValueError) as exc:
            raise StartFailed(f"the artifact {spec.capsule}: {getattr(exc, 'strerror', None) or exc}") from None
        ref = ChildRef(spec.dir.job_id, int(started["pid"]), started.get("start"), node)
        self._node_of[spec.dir.job_id] = node
        child = RayChild(self, keeper, ref, ready_bound=self.config.launch_timeout_secs + 60)
        self._children[spec.dir.job_id] = child
        return child

    def lifeline_close(self, job_id: str) -> None:
        node = self._node_of.get(job_id)
        child = self._children.get(job_id)
        if node is None or (child is not None and not child.alive):
            return  # the keeper closed it itself when the child exited
        handle = self.cluster.cached_keeper(node.node_id)
        if handle is not None:
            self.submit(handle.close_lifeline, job_id)

    async def held_lifelines(self) -> set[str]:
        held: set[str] = set()
        for _node, children in await self._all_children():
            held.update(c["job_id"] for c in children if c.get("lifeline"))
        return held

    async def finish_off(self, job_id: str, pid: int | None) -> None:
        node = self._node_of.get(job_id)
        if node is not None:
            try:
                keeper = await self._keeper(node)
                left = int(await self.call(keeper.finish_off, job_id, True))
                if left:
                    log.info("job_leftovers_killed", job_id=job_id, count=left, node=node.node_id)
            except (RayError, BackendError) as exc:
                log.info("ray_finish_off_skipped", job_id=job_id, node=node.node_id, error=_cause(exc))
        self._children.pop(job_id, None)
        self._node_of.pop(job_id, None)
        pg = self._pgs.pop(job_id, None)
        if pg is not None:
            await self.cluster.release(pg)
        else:
            with contextlib.suppress(Exception):
                await self.cluster.release_job(job_id)

    # -- after a restart ------------------------------------------------------------------------
    async def _all_children(self) -> list[tuple[NodeRef, list[dict[str, Any]]]]:
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

    async def is_running(self, ref: ChildRef) -> bool:
        if ref.node is None:
            return False
        # Disconnected, this raises: reconcile waits for the cluster (ReachesLater) rather than
        # count a child it cannot ask about as lost.
        keeper = await self.cluster.find_keeper(ref.node.node_id)
        if keeper is None:
            return False
        try:
            children = await self.call(
                keeper.list,
            )
        except RayError:
            self.cluster.forget_keeper(ref.node.node_id)
            return False
        for c in children:
            if c["job_id"] == ref.job_id and c["pid"] == ref.pid:
                self._node_of[ref.job_id] = ref.node
                # One that ended while no daemon watched counts as lost, as on one host.
                return c.get("status") is None
        return False

    def adopt(self, ref: ChildRef) -> RayChild:
        assert ref.node is not None
        keeper = self.cluster.cached_keeper(ref.node.node_id)
        if keeper is None:
            raise BackendError(f"no keeper is known for Ray node {ref.node.node_id}")
        self._node_of[ref.job_id] = ref.node
        child = RayChild(self, keeper, ref, ready_bound=0, adopted=True)
        self._children[ref.job_id] = child
        return child

    async def list_running(self, instance: str) -> list[RunningChild]:
        out: list[RunningChild] = []
        for node, children in await self._all_children():
            for c in children:
                if c.get("status") is None:
                    self._node_of.setdefault(c["job_id"], node)
                    out.append(RunningChild(pid=int(c["pid"]), job_id=c["job_id"], pgid=int(c["pid"]), node=node))
        return out

    async def remove_leftovers(self, keep: set[str]) -> int:
        """After a restart: each job not in ``keep`` that a keeper still remembers as ended, or
        that still holds a placement group (a daemon killed while its launch waited for room, or
        before it let go), is let go of. How many jobs had something left."""
        gone: set[str] = set()
        for node, children in await self._all_children():
            ended = [c["job_id"] for c in children if c.get("status") is not None and c["job_id"] not in keep]
            keeper = self.cluster.cached_keeper(node.node_id)
            for job_id in ended:
                with contextlib.suppress(RayError):
                    await self.call(keeper.finish_off, job_id, True)
                    gone.add(job_id)
        for job_id in await self.cluster.job_pgs():
            if job_id not in keep and await self.cluster.release_job(job_id):
                gone.add(job_id)
        if gone:
            log.info("ray_leftovers_removed", count=len(gone))
        return len(gone)

    async def end_orphan(self, found: RunningChild) -> None:
        node = found.node or self._node_of.get(found.job_id)
        if node is None:
            return
        with contextlib.suppress(Exception):
            keeper = await self._keeper(node)
            await self.call(keeper.stop, found.job_id, 0.5)
            await self.call(keeper.finish_off, found.job_id, True)
        with contextlib.suppress(Exception):
            await self.cluster.release_job(found.job_id)


def _cause(exc: BaseException) -> str:
    """One line from a Ray error (the remote exception's own message when there is one)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return _one_line(cause)
    return _one_line(exc)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:300]
