"""The per-node keeper: a detached, named Ray actor that starts and holds one node's children.

Why an actor per node and not a Ray task per child: a child is a plain OS process (the capsule
host or a runtime), started in its own process group as its session's uid, exactly as the local
backend starts one; only the keeper is a Ray worker. The keeper

* holds the write end of every child's lifeline (it never writes to one), so a ``kill -9`` of
  the daemon leaves the children running and a restarted daemon re-adopts them by asking the
  keeper what still runs; the keeper is their parent, so even a child that exited while no
  daemon was connected is reported with its real exit status;
* closes a lifeline when the daemon says so (the parent session ended) — and all of them when
  the keeper itself dies (its process's descriptors close), so the children see EOF and wind
  down, and Ray's worker clean-up kills what is left of its process tree;
* gives each job its own cgroup (``cgroup.kill``) where the node has a writable cgroup v2
  hierarchy, else the ``MURMUR_JOB_ID`` sweep (roost/backends/process/cgroups.py), so no process
  outlives its job on this node;
* applies the limits policy on its own node, as the local backend does on the daemon's host
  (roost/backends/process/joblimits.py): each declared limit is enforced by the best mechanism
  this node has (its v2 controller, else a v1 cgroup of the job's own, else an rlimit), a limit
  nothing here enforces refuses the start before anything runs (``LimitsRefused``, unless the
  daemon's ``resource_limits`` is ``advisory``), and a capsule host is told in
  ``MURMUR_RESOURCE_LIMITS`` what enforces each of its limits here;
* owns this node's root for child directories (nodes share no filesystem; ``$MURMUR_ROOST_NODE_ROOT``
  on the node, else the daemon's ``ray_node_root``): ``<root>/jobs/<job>``
  with ``meta/job_id.txt``, ``input.json``, ``completion.json``, the child's log, the trace lines
  the daemon writes for a session there (``append_trace``); and an artifact
  cache laid out as a registry (``<root>/registry``) that the capsule host resolves from
  (the record methods and file work: roost/backends/ray/node/files.py; the cache:
  roost/backends/ray/node/cache.py).
* does the peer plane's file work for its children's sessions (their exports read, fetched files
  stored under ``peer-in/``), since only it can open their directories (roost/backends/ray/node/peers.py);
* makes the daemon's requests to its children's doors, which listen on this node's loopback
  (a completion's delivery, a relayed message: roost/backends/ray/node/doors.py);
* hands its node's ``MURMUR_ROOST_CA`` (a path on this node) to every child it starts, so a
  child verifies the daemon's certificate at an ``https`` ``advertise_url`` with the same CA
  the keeper's artifact fetch uses.

Its fate (docs/operations.md "Running with Ray"): it outlives the daemon (``lifetime=detached``),
dies with its node, and is started again by the next daemon that needs that node.

Every method is a coroutine on the actor's own event loop (an async actor): children are
spawned on that loop's thread, their exits watched with pidfds, and file work goes to a worker
thread so one slow disk never stalls the other children's watches. This module imports no
``ray``; :mod:`roost.backends.ray.cluster` wraps :class:`NodeKeeper` as an actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from roost.backends.process.cgroups import JobCgroups
from roost.backends.process.joblimits import JobLimits, unbound_sentence
from roost.backends.process.privdrop import find_setpriv
from roost.backends.process.spawn import (
    CannotSwitchUser,
    ChildSpec,
    apply_limits,
    daemon_holds_setpcap,
    require_command,
    run_as,
    start_process,
)
from roost.backends.process.supervise import ProcessWatch, signal_group
from roost.backends.ray.node import cache as keepercache
from roost.backends.ray.node.checks import check_command
from roost.backends.ray.node.doors import DoorKeeper
from roost.backends.ray.node.files import ChildRecordsKeeper, check_job_id
from roost.backends.ray.node.peers import PeerFilesKeeper
from roost.backends.ray.placement import node_root_name, run_as_refusal, setid_capable
from roost.core.limits import LIMITS_ENV
from roost.core.manifest import ResourceCaps
from roost.services.launcher import childrecords
from roost.system.fsutil import Place
from roost.system.procstart import process_identity
from roost.system.tlsclient import CA_ENV

__all__ = ["NODE_ROOT_ENV", "PYTHON_MARK", "NodeKeeper"]

NODE_ROOT_ENV = "MURMUR_ROOST_NODE_ROOT"
"""Set in a Ray node's environment: where that node's keeper keeps its children's directories."""

PYTHON_MARK = "@python"
"""An argv[0] the keeper replaces with its own interpreter (the daemon's path may not exist here)."""

READY_LINE_MAX = 64 * 1024


@dataclass(eq=False)
class _Child:
    job_id: str
    pid: int
    start: float | None
    place: Place
    watch: ProcessWatch
    lifeline: int | None
    ready: asyncio.Future[tuple[str | None, str | None]]
    uid: int | None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    status: str | None = None
    finished_off: bool = False


class NodeKeeper(ChildRecordsKeeper, PeerFilesKeeper, DoorKeeper):
    """One node's keeper. Constructed by Ray on the node it is pinned to."""

    def __init__(self, node_id: str, root: str, job_cgroups: str = "auto") -> None:
        self.node_id = node_id
        # A node's own setting wins over the daemon's ``ray_node_root``: the daemon's path need
        # not exist (or be a good place) on this node.
        own = os.environ.get(NODE_ROOT_ENV) or root
        self.root = Path(own) / node_root_name(node_id)
        self.jobs_root = self.root / "jobs"
        self.cache = self.root / "registry"
        for path in (self.root, self.jobs_root, self.cache):
            path.mkdir(parents=True, exist_ok=True, mode=0o755)
        # This node's job cgroups (v2, and v1 for what v2 lacks here), and what its ended jobs left.
        self.limits = JobLimits.discover(job_cgroups, where=f"Ray node {node_id}", holder="the node keeper")
        self.limits.sweep_empty()
        self.children: dict[str, _Child] = {}
        self.started = time.time()

    @property
    def cgroups(self) -> JobCgroups | None:
        """This node's v2 job cgroups (None: the marker sweep finishes jobs off here)."""
        return self.limits.cgroups

    # -- about this node -------------------------------------------------------------------
    async def info(self, commands: dict[str, list[str]] | None = None, path: str | None = None) -> dict[str, Any]:
        """What ``roostctl doctor`` and reconcile need to know about this keeper and its node.

        ``commands`` are the daemon's ``capsule`` and ``runtime`` commands as it would start a
        child here (argv[0] ``@python`` is this node's interpreter), ``path`` the ``PATH`` it
        gives children: each is checked on this node (roost/backends/ray/node/checks.py), the
        capsule command by running it with ``--version``."""
        rss = psutil.Process().memory_info().rss
        cache = await asyncio.to_thread(keepercache.cache_status, self.cache)
        checks: dict[str, Any] = {}
        child_path = path or os.environ.get("PATH", os.defpath)
        for role, argv in (commands or {}).items():
            here = [sys.executable, *argv[1:]] if argv and argv[0] == PYTHON_MARK else list(argv)
            found = await asyncio.to_thread(check_command, here, child_path, run_version=role == "capsule")
            checks[role] = {**found, "argv": list(argv)}  # as the daemon names it; "found" is this node's
        return {
            "node_id": self.node_id,
            "pid": os.getpid(),
            "root": str(self.root),
            "children": sum(1 for c in self.children.values() if c.status is None),
            "rss_bytes": rss,
            "commands": checks,
            "artifacts": cache["count"],
            "cache": cache,
            "cgroups": str(self.cgroups.root) if self.cgroups else None,
            "resource_limits": self.limits.mechanisms().to_dict(),
            "started": self.started,
            **(await self.identity()),
        }

    async def identity(self) -> dict[str, Any]:
        """Who this keeper runs as, and whether it can start children as other uids (the daemon
        refuses a launch of a uid it cannot, before anything of the job is made)."""
        status = await asyncio.to_thread(Path("/proc/self/status").read_text)
        return {"uid": os.geteuid(), "can_switch": setid_capable(status)}

    # -- artifacts -------------------------------------------------------------------------
    async def has_artifact(self, name: str, version: str, sha256: str) -> bool:
        return await asyncio.to_thread(keepercache.has_artifact, self.cache, name, version, sha256)

    async def put_artifact(self, name: str, version: str, sha256: str, data: bytes) -> None:
        """Cache an artifact's bytes after checking they are the sha256 the daemon resolved."""
        await asyncio.to_thread(keepercache.put_artifact, self.cache, name, version, sha256, data)

    async def fetch_artifact(self, name: str, version: str, sha256: str, url: str, token: str) -> None:
        """Fetch the artifact from the daemon at ``url`` by its sha256 (``GET /artifacts/{sha256}``
        with this node's keeper token), verified, and place it where the capsule host resolves it.
        The daemon's TLS certificate is checked against ``MURMUR_ROOST_CA`` when this node has one."""
        from roost.backends.ray.node.artifactfetch import fetch_artifact_blocking

        ca = os.environ.get(CA_ENV) or None
        blob = await asyncio.to_thread(fetch_artifact_blocking, url, sha256, self.root / "blobs", token=token, ca=ca)
        await asyncio.to_thread(keepercache.place_artifact, self.cache, name, version, sha256, blob)

    # -- processes -------------------------------------------------------------------------
    async def start(
        self,
        job_id: str,
        argv: list[str],
        env: dict[str, str],
        uid: int | None,
        caps: dict[str, Any],
        stdin: bytes | None,
        limit_host: bool,
        containment: str = "advisory",
        limits_mode: str = "enforce",
        capsule: str = "",
    ) -> dict[str, Any]:
        """Start the child in its directory, in its own process group, as ``uid``; hold its lifeline.

        It execs through the privilege-dropping step (roost/backends/process/privdrop.py), as on
        the daemon's host; ``containment`` is the manifest's floor (``sealed`` keeps CAP_SETFCAP
        for a uid-0 child's bwrap).

        ``caps`` are the manifest's ``capabilities.resources``, decided on and enforced here under
        ``limits_mode`` (the daemon's ``resource_limits``): a limit this node cannot enforce raises
        :class:`roost.backends.base.LimitsRefused` naming ``capsule`` before anything starts. With
        ``limit_host`` the child itself gets the rlimits; else it is a capsule host, which sets
        them on its entrypoint and reads what enforces each limit from ``MURMUR_RESOURCE_LIMITS``.

        ``argv[0] == "@python"`` becomes this node's interpreter; ``MURMUR_REGISTRY_PATH`` is this
        keeper's artifact cache. Returns ``{pid, start}`` (start: :func:`roost.system.procstart.process_identity`).
        """
        if job_id in self.children:
            raise ValueError(f"job {job_id} already runs on this node")
        resources = ResourceCaps.model_validate(caps)
        coords = capsule or job_id
        plan = self.limits.decide(resources, limits_mode, coords)
        me = await self.identity()
        why = run_as_refusal(self.node_id, uid, me["uid"], me["can_switch"])
        if why is not None:
            raise CannotSwitchUser(why)
        place = self.place(job_id, uid)
        user = await asyncio.to_thread(run_as, uid)
        if argv and argv[0] == PYTHON_MARK:
            argv = [sys.executable, *argv[1:]]
        await asyncio.to_thread(require_command, argv[0], env.get("PATH", os.environ.get("PATH", os.defpath)))
        # What the daemon's finish_off removes if the start fails from here on.
        cgroups, plan = await asyncio.to_thread(self.limits.make, job_id, resources, plan, coords)
        log_fd = await asyncio.to_thread(childrecords.open_log, place)
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        env = dict(env)
        env["MURMUR_SPAWNER_LIFELINE"] = str(read_fd)
        env["MURMUR_REGISTRY_PATH"] = str(self.cache)
        env.setdefault("PATH", os.environ.get("PATH", os.defpath))
        if not limit_host:  # a capsule host reports them in effective_grants
            env[LIMITS_ENV] = plan.to_env()
        ca = os.environ.get(CA_ENV)
        if ca:  # the node's own CA file: its children verify the daemon's certificate with it
            env[CA_ENV] = ca
        spec = ChildSpec(
            argv=argv,
            env=env,
            cwd=str(place.path),
            lifeline_fd=read_fd,
            stderr_fd=log_fd,
            user=user,
            setpriv=await asyncio.to_thread(find_setpriv),
            sealed=containment == "sealed",
            setpcap=await asyncio.to_thread(daemon_holds_setpcap),
        )
        try:
            popen = start_process(spec)
            # Inline: the child has only just exec'd, and forks nothing before it has registered.
            unlimited = self.limits.enter(job_id, popen.pid, cgroups, plan)
        except OSError:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
            os.close(log_fd)
        if unlimited and plan.mode == "enforce":
            # Its limits would not bind it: end it before it has done anything.
            signal_group(popen.pid, signal.SIGKILL)
            os.close(write_fd)
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                await asyncio.to_thread(popen.wait, 5)
            raise RuntimeError(unbound_sentence(unlimited))
        start = process_identity(popen.pid)
        if limit_host:
            apply_limits(popen.pid, resources)
        watch = ProcessWatch(popen.pid, popen)
        watch.start()
        loop = asyncio.get_running_loop()
        child = _Child(
            job_id=job_id,
            pid=popen.pid,
            start=start,
            place=place,
            watch=watch,
            lifeline=write_fd,
            ready=loop.create_future(),
            uid=uid,
        )
        self.children[job_id] = child
        assert popen.stdin is not None
        with contextlib.suppress(OSError):
            if stdin:
                popen.stdin.write(stdin)
            popen.stdin.close()
        assert popen.stdout is not None
        child.tasks.append(loop.create_task(self._read_stdout(child, popen)))
        child.tasks.append(loop.create_task(self._watch_exit(child)))
        return {"pid": popen.pid, "start": start}

    async def _read_stdout(self, child: _Child, popen: subprocess.Popen[bytes]) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READY_LINE_MAX)
        assert popen.stdout is not None
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), popen.stdout)
        try:
            try:
                line = await reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                _resolve(child.ready, (None, "the child's first stdout line was longer than 64 KiB"))
                line = b""
            if line:
                _resolve(child.ready, (line.decode("utf-8", "replace"), None))
            else:
                status = await asyncio.shield(child.watch.exited)
                _resolve(child.ready, (None, f"the child ended before it reported ready ({status})"))
                return
            while True:
                try:
                    more = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    continue
                if not more:
                    return
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(
                        childrecords.append_log, child.place, [more.decode("utf-8", "replace").rstrip("\n")]
                    )
        finally:
            transport.close()

    async def _watch_exit(self, child: _Child) -> None:
        status = await asyncio.shield(child.watch.exited)
        child.status = status
        self._close_lifeline(child)
        # Whatever the job left behind in its group, then in its cgroup (or marked by its id).
        signal_group(child.pid, signal.SIGKILL)
        await self._finish_off(child.job_id)
        child.finished_off = True

    async def wait_ready(self, job_id: str, bound_secs: float) -> tuple[str | None, str | None]:
        """The child's first stdout line, or why there is none (an exit, EOF, the bound)."""
        child = self._child(job_id)
        try:
            return await asyncio.wait_for(asyncio.shield(child.ready), bound_secs)
        except TimeoutError:
            return None, f"the child did not report ready within {bound_secs:g}s (launch bound), so it was killed"

    async def wait_exit(self, job_id: str) -> str:
        """Resolves with the child's exit status sentence once it and its leftovers are gone."""
        child = self._child(job_id)
        status = await asyncio.shield(child.watch.exited)
        for task in child.tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), 10)
        return status

    async def signal(self, job_id: str, signum: int) -> bool:
        child = self.children.get(job_id)
        if child is None or child.status is not None:
            return False
        return signal_group(child.pid, signum)

    async def stop(self, job_id: str, grace: float) -> bool:
        """SIGTERM to the group, SIGKILL ``grace`` seconds later; True when SIGKILL was needed."""
        child = self.children.get(job_id)
        if child is None or not child.watch.alive:
            return False
        signal_group(child.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(child.watch.exited), grace)
            return False
        except TimeoutError:
            signal_group(child.pid, signal.SIGKILL)
            await asyncio.shield(child.watch.exited)
            return True

    async def close_lifeline(self, job_id: str) -> None:
        child = self.children.get(job_id)
        if child is not None:
            self._close_lifeline(child)

    def _close_lifeline(self, child: _Child) -> None:
        fd, child.lifeline = child.lifeline, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    async def finish_off(self, job_id: str, forget: bool = False) -> int:
        """Kill what is left of the job (its cgroup, else its marked processes); with ``forget``
        also drop the keeper's memory of an ended child. One call, because the daemon makes it
        for every job that ends: a child whose exit the keeper saw is already finished off."""
        child = self.children.get(check_job_id(job_id))
        left = 0 if child is not None and child.finished_off else await self._finish_off(job_id)
        if forget:
            await self.forget(job_id)
        return left

    async def _finish_off(self, job_id: str) -> int:
        with contextlib.suppress(OSError):
            left, _how = await asyncio.to_thread(self.limits.finish, job_id)
            return left
        return 0

    async def list(self) -> list[dict[str, Any]]:
        """Every child this keeper knows: running (``status`` None) or ended, not yet forgotten."""
        return [
            {"job_id": c.job_id, "pid": c.pid, "start": c.start, "status": c.status, "lifeline": c.lifeline is not None}
            for c in self.children.values()
        ]

    async def forget(self, job_id: str) -> None:
        """The daemon has recorded the child's end: drop what the keeper remembers of it."""
        child = self.children.get(job_id)
        if child is not None and child.status is not None:
            del self.children[job_id]

    async def end_all(self, grace: float) -> int:
        """Stop every child (an operator's teardown of this keeper); how many were running."""
        running = [c for c in self.children.values() if c.watch.alive]
        await asyncio.gather(*(self.stop(c.job_id, grace) for c in running), return_exceptions=True)
        return len(running)

    def _child(self, job_id: str) -> _Child:
        child = self.children.get(job_id)
        if child is None:
            raise KeyError(f"no child {job_id} on this node")
        return child


def _resolve(fut: asyncio.Future[tuple[str | None, str | None]], value: tuple[str | None, str | None]) -> None:
    if not fut.done():
        fut.set_result(value)
