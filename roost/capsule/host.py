"""``roost-capsule run``: one script-capsule session from launch to exit.

The launch is checked first (:mod:`roost.capsule.prepare`); then the door is bound before
registering (:mod:`roost.capsule.daemonlink`: the daemon records its URL) and the ready line is
printed last, so a launcher that reads it can use the door and the daemon already knows the
session. Tasks are served by :mod:`roost.capsule.serving`; this module owns the session's
lifecycle: listeners, ``session_start``/``session_end``, the entrypoints' subtree, the endings.

Endings: a natural end (``after_task: exit``) writes ``completion.json`` and posts it — unless the
daemon's launcher started this child, which then delivers it sealed once the child has exited (a
completion the child posted itself would reach its parent's door unsealed, so untrusted; see
docs/security.md, "Sealed origin and trust"); SIGTERM/SIGINT
(the launcher ending the delegation) and lifeline EOF (the spawner is gone) cancel the running
task and write no completion — the launcher records ``terminated`` itself, and a dead spawner has
no door to hear one. Every ending writes exactly one ``session_end`` after every ``task_end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable
from typing import Literal
from urllib.parse import urlsplit

from aiohttp import web

from a2a.client import A2AClient
from a2a.protocol.errors import JsonRpcError
from a2a.protocol.models import TaskState
from roost.capsule.confine import effective_grants, plan_grants
from roost.capsule.daemonlink import DaemonLink
from roost.capsule.entrypoint import task_env
from roost.capsule.hostsock import HostSocket
from roost.capsule.lifeline import LifelineWatch
from roost.capsule.limits import limits_report, rlimit_plan
from roost.capsule.otelspans import session_spans
from roost.capsule.peerdoor import PeerDoor
from roost.capsule.prepare import ContainmentRefused, LaunchRefused, Prepared, RunOptions, door_note, prepare, say
from roost.capsule.pushing import SessionEgress, push_delivery
from roost.capsule.reaper import KILL_GRACE_SECS, become_subreaper, descendants, kill_tree, reap_orphans
from roost.capsule.sandbox import Confinement
from roost.capsule.seccomp import SeccompUnavailable, build_filter
from roost.capsule.serving import EXIT_STATUS, TaskServer, build_door, libc_prctl
from roost.capsule.taskinput import read_initial_task, read_job_id
from roost.core.authz import Listener
from roost.core.completion import CompletionRecord
from roost.core.manifest import Manifest
from roost.http.authz import EdgeNames, guard_handler
from roost.http.guard import ConnectionGuard
from roost.http.server import QuietHandlerRunner
from roost.observe.tracelines import TraceWriter
from roost.services.completionfile import report, write_completion

__all__ = ["LaunchRefused", "Prepared", "RunOptions", "prepare", "run"]

StopReason = Literal["natural", "signal", "lifeline"]
LIFELINE_GRACE_SECS = 20.0
KILL_GRACE_ENV = "MURMUR_KILL_GRACE_SECS"
REAP_EVERY_SECS = 1.0
PR_SET_DUMPABLE = 4
DOOR_HEAD_SECS = 10.0
DOOR_KEEPALIVE_SECS = 15.0
DOOR_CONNECTIONS_PER_UID = 256


def kill_grace(env: dict[str, str] | os._Environ[str]) -> float:
    """The host's kill grace: the launcher passes one shorter than its own; else the default."""
    raw = env.get(KILL_GRACE_ENV, "").strip()
    try:
        value = float(raw) if raw else KILL_GRACE_SECS
    except ValueError:
        value = KILL_GRACE_SECS
    return value if 0 < value <= 600 else KILL_GRACE_SECS


def _categories(m: Manifest) -> list[str]:
    caps = m.capabilities
    out = []
    if caps.network.allow or caps.network.unix_sockets:
        out.append("network")
    if caps.filesystem.scope is not None or caps.filesystem.workdir_exec:
        out.append("filesystem")
    if caps.shell.allow:
        out.append("shell")
    return out


def _failed_status(returncode: int | None) -> int:
    """The host's exit status after a failed last task: the entrypoint's own (so ``roostctl job``
    shows what its stderr says), 128 + N for a signal N, else 1."""
    if returncode is None or returncode == 0:
        return 1
    return min(255, 128 - returncode) if returncode < 0 else min(255, returncode)


class Host:
    """The running session: door, host socket, trace, tasks, and the way it ends."""

    def __init__(self, p: Prepared) -> None:
        self.p = p
        m = p.manifest
        self.trace = TraceWriter(p.workdir, p.session_id)
        self.delegated = p.handle is not None or p.approval is not None
        self.stop_event = asyncio.Event()
        self.stop_reason: StopReason | None = None
        self.stopping = False
        self.link = DaemonLink(p)
        self.launcher_delivers = False
        self.tasks = TaskServer(
            p,
            self.trace,
            job_id=read_job_id(p.workdir, os.environ),
            confinement=Confinement(p.probe, p.decision, None),
            grace=kill_grace(os.environ),
            rlimits=rlimit_plan(m.capabilities.resources),
            is_stopping=lambda: self.stopping,
        )
        self.tasks.spans = session_spans(
            m.observability.otel_endpoint, name=m.name, version=m.version, session_id=p.session_id, workdir=p.workdir
        )
        self.egress = SessionEgress(m.capabilities.network.allow, p.roost_url)
        push, self._poster = push_delivery(self.egress)
        self.door = build_door(p, self.tasks, push)
        self.hostsock: HostSocket | None = None
        self._runner: web.BaseRunner | None = None
        self._watch: LifelineWatch | None = None
        self._reaper: asyncio.TimerHandle | None = None

    # -- the entrypoints' subtree -----------------------------------------------------------------

    def _reap(self) -> None:
        """Collect orphans the kernel re-parented to us (we are their subreaper), every second."""
        if not self.tasks.spawning:
            reap_orphans(self.tasks.entry_pids)
        self._reaper = asyncio.get_running_loop().call_later(REAP_EVERY_SECS, self._reap)

    def _hard_exit(self, status: int) -> None:
        """The lifeline's last resort: SIGKILL the whole subtree first, then leave."""
        for proc in descendants():
            with contextlib.suppress(Exception):
                proc.kill()
        os._exit(status)

    # -- stopping ---------------------------------------------------------------------------------

    def _stop(self, reason: StopReason) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stopping = reason != "natural"
            if reason == "lifeline":
                self._spawner_ended()
            self.stop_event.set()
        elif self.stop_reason == "natural" and reason != "natural":
            self.stop_reason = reason  # escalate a wind-down already under way
            self.stopping = True
            asyncio.get_running_loop().create_task(self._cancel_running())
        if reason == "lifeline":
            asyncio.get_running_loop().call_later(LIFELINE_GRACE_SECS, self._hard_exit, 143)

    def _spawner_ended(self) -> None:
        say("spawner lifeline closed — the session that delegated to this one has ended")
        payload: dict[str, object] = {}
        if self.p.handle is not None:
            payload = {"spawned_by": self.p.handle.session_id, "delegation_id": self.p.handle.delegation_id}
        self.trace.write("spawner_ended", payload)

    async def _cancel_running(self) -> None:
        running = self.door.running
        if running is not None:
            with contextlib.suppress(JsonRpcError):
                await self.door.cancel(running.id)

    async def _register(self, capsule_url: str) -> None:
        required = self.delegated or bool(self.p.manifest.capabilities.spawn.allow)
        registration = await self.link.register(capsule_url, required=required)
        if registration.door_key is not None:
            self.door.seal_key = registration.door_key  # stamps are believed only when sealed
        self.launcher_delivers = registration.launcher_delivers

    # -- the session ------------------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop, "signal")
        if self.p.decision.achieved == "advisory":
            # Nothing confines the entrypoint, which runs as our uid: at least it may not ptrace
            # us or read our memory for the credential (docs/security.md, "Sealed origin and trust").
            with contextlib.suppress(OSError):
                libc_prctl(PR_SET_DUMPABLE, 0)
        if not become_subreaper():
            say("could not become a child subreaper; a descendant that leaves its session may outlive it")
        self._reaper = loop.call_later(REAP_EVERY_SECS, self._reap)
        self.link.open()
        try:
            return await self._run()
        finally:
            await self._cleanup()

    async def _start_listeners(self) -> str:
        names = EdgeNames(lambda: (self.door.url,))
        peer_door = PeerDoor(self.p.roost_url, credential=lambda: self.link.credential, http=lambda: self.link.http)
        self._runner = QuietHandlerRunner(
            # GET /resources/peer/<handle> too (roost/capsule/peerdoor.py), behind the door's table.
            guard_handler(Listener.DOOR, peer_door.wrap(self.door.handle), names=names),
            # The daemon's connection guard: a head deadline, an idle keep-alive timeout and a cap
            # on open connections per uid (a response that streams is not idle).
            policy=ConnectionGuard(header_timeout_secs=DOOR_HEAD_SECS, max_per_uid=DOOR_CONNECTIONS_PER_UID),
            keepalive_timeout=DOOR_KEEPALIVE_SECS,
            note=door_note,
            on_cleanup=self.door.shutdown,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        url = f"http://127.0.0.1:{port}"
        self.door.url = url
        self.egress.door_bound("127.0.0.1", port)
        self.hostsock = HostSocket(
            self.p.records,
            daemon_url=self.p.roost_url,
            credential=lambda: self.link.credential,
            callers=self.tasks.trust_of_caller,
            traceparent=self.tasks.traceparent,
            jobs=self.tasks.job_seen,
        )
        await self.hostsock.start()
        self.tasks.socket_path = self.hostsock.path
        return url

    async def _run(self) -> int:
        p = self.p
        m = p.manifest
        try:
            url = await self._start_listeners()
            await self._register(url)
        except LaunchRefused as exc:
            say(str(exc))
            return 1
        assert self.hostsock is not None
        self.tasks.env = task_env(
            os.environ,
            {
                "MURMUR_JOB_ID": self.tasks.job_id,
                "MURMUR_ROOST_URL": p.roost_url,
                "MURMUR_SESSION_ID": p.session_id,
                "MURMUR_HOST_SOCKET": str(self.hostsock.path),
            },
        )
        d = p.decision
        grants = None
        if d.achieved != "advisory":
            grants = plan_grants(
                m,
                achieved=d.achieved,
                abi=p.probe.landlock_abi,
                workdir=p.workdir,
                artifact=p.records / "artifact",
                records=p.records,
                argv0=p.argv[0],
                path_env=self.tasks.env.get("PATH", os.defpath),
                daemon_port=_port_of(p.roost_url),
                door_port=_port_of(url),
            )
        self.tasks.confinement.grants = grants
        if grants is not None:
            try:
                self.tasks.confinement.seccomp = build_filter()
            except SeccompUnavailable as exc:
                grants.advisory.append(
                    f"the seccomp filter (scheduler reach, memfd and fexecve) is not applied: {exc.strerror or exc}"
                )
        granted = effective_grants(m, p.probe, d, grants)
        granted["resource_limits"] = limits_report(m.capabilities.resources, os.environ)
        start: dict[str, object] = {
            "capsule_name": m.name,
            "capsule_version": m.version,
            "capabilities": _categories(m),
            "containment_declared": d.declared,
            "containment_achieved": d.enforceable,  # the host's class, capped by workdir_exec (seed 000)
            "userns_grant": p.probe.userns_grant,
            "workdir_exec": m.capabilities.filesystem.workdir_exec,
            "effective_grants": granted,
            "resumed_from": None,
            "context_id": None,
        }
        if p.handle is not None:
            start["spawned_by"] = p.handle.session_id
            start["delegation_id"] = p.handle.delegation_id
        self.trace.write("session_start", start, parent_id=None)
        if p.opts.json:
            ready: dict[str, str] = {"session_id": p.session_id, "capsule_url": url}
            if p.formation_id is not None:
                ready["formation_id"] = p.formation_id  # as upstream's readiness line carries it
            sys.stdout.write(json.dumps(ready, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        else:
            say(f"session {p.session_id} of {m.coordinates} is serving its A2A door at {url}")
        if p.lifeline_fd is not None:
            self._watch = LifelineWatch(p.lifeline_fd, lambda: self._stop("lifeline"))
            self._watch.start()
        initial = await asyncio.to_thread(read_initial_task, p.workdir)
        if initial is not None:
            self.tasks.initial_id = self.door.submit(initial.text).id
        if m.lifecycle.after_task == "exit":
            if initial is not None:
                await _first(self.tasks.initial_done.wait(), self.stop_event.wait())
            self._stop("natural")
        await self.stop_event.wait()
        return await self._end()

    async def _end(self) -> int:
        p = self.p
        tasks = self.tasks
        self.door.close()
        if self.stopping:
            await self._cancel_running()
        await self.door.drain()
        await self.door.shutdown()
        for task_id in list(tasks.task_nodes):  # tasks still waiting for input end with the session
            tasks.task_end(task_id, TaskState.CANCELED)
        reason = self.stop_reason
        last = EXIT_STATUS.get(tasks.last_state, "failed") if tasks.last_state is not None else "ok"
        duration = int((time.monotonic() - p.started_mono) * 1000)
        self.trace.write(
            "session_end",
            {f"total_{k}": v for k, v in tasks.totals.items()} | {"duration_ms": duration, "exit_status": last},
        )
        self.trace.close()  # session_end is the file's last line
        ok = tasks.last_state is TaskState.COMPLETED
        if reason == "natural":
            if p.handle is not None:
                await self._report_completion(ok, duration)
            await self.link.deregister("complete" if ok or tasks.last_state is None else "failed")
            return 0 if ok or tasks.last_state is None else _failed_status(tasks.last_returncode)
        await self.link.deregister("failed")
        return 143

    async def _report_completion(self, ok: bool, duration: int) -> None:
        p = self.p
        assert p.handle is not None
        has_result = (p.workdir / "out" / "result.txt").is_file()
        rec = CompletionRecord(
            delegation_id=p.handle.delegation_id,
            capsule_name=p.manifest.name,
            capsule_version=p.manifest.version,
            session_id=p.session_id,
            status="ok" if ok else "error",
            workdir=str(p.workdir),
            duration_ms=duration,
            reported_by="child",
            result_path="out/result.txt" if has_result else None,
        )
        if self.launcher_delivers:
            # The launcher posts it, sealed, once we have exited (at most once, even across a
            # daemon restart); a post of our own would arrive unsealed, so untrusted.
            await asyncio.to_thread(write_completion, p.workdir, rec)
            return
        async with A2AClient(total_timeout=10.0) as client:
            final = await report(client, p.handle, p.workdir, rec)
        if final.delivery_error is not None:
            say(
                f"delegation {rec.delegation_id}: the completion could not be delivered to {p.handle.url}: "
                f"{final.delivery_error}; recorded in {p.workdir / 'completion.json'}"
            )

    async def _cleanup(self) -> None:
        self.link.stop_renewing()
        if self._reaper is not None:
            self._reaper.cancel()
        if descendants():
            await kill_tree(None, grace=self.tasks.grace, keep=self.tasks.entry_pids)
        if self._watch is not None:
            self._watch.stop()
        if self.hostsock is not None:
            await self.hostsock.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self._poster.close()
        await self.link.close()


async def _first(*aws: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


def _port_of(url: str | None) -> int | None:
    if not url:
        return None
    try:
        return urlsplit(url).port
    except ValueError:
        return None


async def _refuse_containment(exc: ContainmentRefused) -> None:
    """E-CAP-003 before anything runs: a completion that says so (delivered to a spawner)."""
    p = exc.prepared
    rec = CompletionRecord(
        delegation_id=p.handle.delegation_id if p.handle is not None else "",
        capsule_name=p.manifest.name,
        capsule_version=p.manifest.version,
        session_id=p.session_id,
        status="error",
        workdir=str(p.workdir),
        duration_ms=int((time.monotonic() - p.started_mono) * 1000),
        reported_by="child",
        detail=str(exc),
    )
    if p.handle is None:
        await asyncio.to_thread(write_completion, p.workdir, rec)
        return
    async with A2AClient(total_timeout=10.0) as client:
        await report(client, p.handle, p.workdir, rec)


def run(opts: RunOptions) -> int:
    """Prepare (may refuse with one sentence), then run the session; returns the exit status."""
    try:
        prepared = prepare(opts)
    except ContainmentRefused as exc:
        say(str(exc))
        asyncio.run(_refuse_containment(exc))
        return 1
    except LaunchRefused as exc:
        say(str(exc))
        return 1
    return asyncio.run(Host(prepared).run())
