"""``roost-capsule run``: one script-capsule session from launch to exit.

Why this order: everything that can refuse the launch
(``MURMUR_SPAWNER``, the lifeline, the artifact, the approval, registration) is checked before
``session_start`` is written, so a refused launch leaves an empty trace and no session. The door
is bound before registering (the daemon records its URL) and the ready line is printed last, so
a launcher that reads it can use the door and the daemon already knows the session.

Endings: a natural end (``after_task: exit``) writes and posts ``completion.json``; SIGTERM/SIGINT
(the launcher ending the delegation) and lifeline EOF (the spawner is gone) cancel the running
task and write no completion — the launcher records ``terminated`` itself, and a dead spawner has
no door to hear one. Every ending writes exactly one ``session_end`` after every ``task_end``.

Trace appends are done inline on the loop: each is one small ``O_APPEND`` write, cheaper than a
thread hop, and inline keeps the record order identical to the order of events.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from a2a.client import A2AClient
from a2a.door import DEFAULT_BLOCKING_CAP_SECS, Door, DoorTask, TaskOutcome
from a2a.errors import JsonRpcError
from a2a.models import TaskState
from a2a.origin import Origin
from roost.capsule.confine import Confinement, effective_grants, outside_workdir, plan_grants
from roost.capsule.entrypoint import EntrypointError, Launch, resolve_argv, run_entrypoint, task_env
from roost.capsule.hostsock import HostSocket
from roost.capsule.lifeline import ENV as LIFELINE_ENV
from roost.capsule.lifeline import LifelineError, LifelineWatch, lifeline_refusal, take_lifeline
from roost.capsule.limits import apply_rlimits, rlimit_plan
from roost.capsule.probe import Decision, HostProbe, decide, probe_host, refusal
from roost.capsule.reaper import KILL_GRACE_SECS, become_subreaper, descendants, kill_tree, reap_orphans
from roost.capsule.taskinput import read_initial_task, read_job_id, write_results
from roost.completion import CompletionRecord, SpawnerHandle, SpawnerHandleError, report, write_completion
from roost.http.caller import caller_of
from roost.ids import session_id as mint_session_id
from roost.manifest import Manifest
from roost.registry import Registry
from roost.registry.errors import RegistryError
from roost.trace import TRACE_FILE, TraceWriter, records_dir
from roost.wire import CREDENTIAL_HEADER

__all__ = ["LaunchRefused", "Prepared", "RunOptions", "prepare", "run"]

StopReason = Literal["natural", "signal", "lifeline"]
LIFELINE_GRACE_SECS = 20.0
EXIT_STATUS = {TaskState.COMPLETED: "ok", TaskState.FAILED: "failed", TaskState.CANCELED: "canceled"}
KILL_GRACE_ENV = "MURMUR_KILL_GRACE_SECS"
REAP_EVERY_SECS = 1.0
PR_SET_PDEATHSIG = 1
REGISTER_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=5)
DEREGISTER_TIMEOUT = aiohttp.ClientTimeout(total=5, sock_connect=2)
RENEW_TIMEOUT = aiohttp.ClientTimeout(total=10, sock_connect=2)


class LaunchRefused(Exception):
    """The launch is refused before any session exists; the message is one sentence."""


class ContainmentRefused(LaunchRefused):
    """E-CAP-003: the declared containment floor is above what this host can enforce."""

    def __init__(self, message: str, prepared: Prepared) -> None:
        super().__init__(message)
        self.prepared = prepared


def spawner_refusal(reason: str) -> str:
    return (
        f"MURMUR_SPAWNER does not carry a readable spawner handle: {reason}; a delegated child must be able "
        "to tell its spawner that it finished, so the launch is refused rather than run unreportable"
    )


def register_refusal(url: str, reason: str) -> str:
    return (
        f"failed to register this session with mur-roost at {url}: {reason}; a capsule declaring "
        "capabilities.spawn.allow must be known to the daemon that referees its spawns, so the launch is "
        "refused rather than run unrefereed"
    )


@dataclass(frozen=True, slots=True)
class RunOptions:
    name: str
    version: str
    workdir: Path
    json: bool = False
    spawn_grant_stdin: bool = False
    registry_path: Path | None = None


@dataclass(slots=True)
class Prepared:
    opts: RunOptions
    manifest: Manifest
    workdir: Path
    session_id: str
    records: Path
    argv: list[str]
    handle: SpawnerHandle | None
    lifeline_fd: int | None
    approval: str | None
    roost_url: str | None
    started_mono: float
    probe: HostProbe
    decision: Decision


def _registry_root(opts: RunOptions) -> Path:
    if opts.registry_path is not None:
        return opts.registry_path
    env = os.environ.get("MURMUR_REGISTRY_PATH", "").strip()
    if env:
        return Path(env)
    return Path.home() / ".murmur" / "artifacts"


def prepare(opts: RunOptions) -> Prepared:
    """Every check that can refuse the launch, in upstream order (blocking, before the loop)."""
    started = time.monotonic()
    probe = probe_host()  # forks: before any thread or event loop exists
    raw_handle = os.environ.get("MURMUR_SPAWNER", "")
    handle: SpawnerHandle | None = None
    if raw_handle.strip():
        try:
            handle = SpawnerHandle.parse(raw_handle)
        except SpawnerHandleError as exc:
            raise LaunchRefused(spawner_refusal(str(exc))) from None
    try:
        fd = take_lifeline(os.environ.get(LIFELINE_ENV))
    except LifelineError as exc:
        raise LaunchRefused(lifeline_refusal(str(exc))) from None
    workdir = opts.workdir.absolute()
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaunchRefused(f"cannot use the workdir {workdir}: {exc.strerror or exc}") from None
    registry = Registry(_registry_root(opts))
    try:
        artifact = registry.resolve(opts.name, opts.version)
    except RegistryError as exc:
        raise LaunchRefused(str(exc)) from None
    manifest = artifact.manifest
    if not manifest.entrypoint:
        raise LaunchRefused(
            f"{artifact.coordinates} declares no entrypoint, so roost-capsule cannot run it; "
            "a capsule without one runs under its own runtime (mur run)"
        )
    approval: str | None = None
    if opts.spawn_grant_stdin:
        approval = sys.stdin.readline().strip() or None
        if approval is None:
            raise LaunchRefused("--spawn-grant-stdin was given but stdin carried no spawn approval line")
    sid = mint_session_id()
    records = records_dir(workdir, sid)
    records.mkdir(parents=True, mode=0o700)
    (records / TRACE_FILE).touch(mode=0o600)  # a refused launch still leaves an (empty) trace
    unpacked = records / "artifact"
    try:
        registry.extract(artifact, unpacked)
        argv = resolve_argv(manifest.entrypoint, unpacked)
    except (RegistryError, EntrypointError) as exc:
        raise LaunchRefused(str(exc)) from None
    url = os.environ.get("MURMUR_ROOST_URL", "").strip().rstrip("/") or None
    caps = manifest.capabilities
    decision = decide(probe, caps.containment, workdir_exec=caps.filesystem.workdir_exec)
    prepared = Prepared(
        opts, manifest, workdir, sid, records, argv, handle, fd, approval, url, started, probe, decision
    )
    if not decision.floor_met:
        raise ContainmentRefused(refusal(manifest.coordinates, decision), prepared)
    bad = outside_workdir(manifest) if decision.achieved != "advisory" else None
    if bad is not None:
        raise LaunchRefused(
            f"E-CAP-002: {manifest.coordinates} declares the filesystem path '{bad}', which is not a relative "
            "path inside the workdir, so its containment cannot be drawn"
        )
    return prepared


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


BLOCKING_CAP_ENV = "MURMUR_A2A_BLOCKING_CAP_SECS"


def blocking_cap(env: Mapping[str, str]) -> float:
    """How long a blocking send may hold the door (docs/a2a.md): the env value if it is a positive
    number of seconds, else the door's default."""
    raw = env.get(BLOCKING_CAP_ENV, "").strip()
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_BLOCKING_CAP_SECS
    return value if 0 < value < float("inf") else DEFAULT_BLOCKING_CAP_SECS


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"roost-capsule: {text}\n")
        sys.stderr.flush()


class Host:
    """The running session: door, host socket, trace, tasks, and the way it ends."""

    def __init__(self, p: Prepared) -> None:
        self.p = p
        m = p.manifest
        self.trace = TraceWriter(p.workdir, p.session_id)
        self.credential: str | None = None
        self.job_id = read_job_id(p.workdir, os.environ)
        self.delegated = p.handle is not None or p.approval is not None
        self.stop_event = asyncio.Event()
        self.stop_reason: StopReason | None = None
        self.stopping = False
        self.current: DoorTask | None = None
        self.initial_id: str | None = None
        self.initial_done = asyncio.Event()
        self.last_state: TaskState | None = None
        self.task_nodes: dict[str, tuple[str, float]] = {}
        self.totals = dict.fromkeys(("turns", "input_tokens", "output_tokens", "tool_calls", "shell_calls"), 0)
        self.door = Door(
            name=m.name,
            version=m.version,
            session_id=p.session_id,
            runner=self._run_task,
            task_acceptance=m.lifecycle.task_acceptance,
            queue_depth=m.lifecycle.queue_depth,
            peer_tasks_accept=m.exports.peer_tasks.accept,
            description=m.description,
            on_activate=self._on_activate,
            on_finish=self._on_finish,
            identify=loopback_owner,
            local_owner=f"uid:{os.getuid()}",
            blocking_cap_secs=blocking_cap(os.environ),
        )
        self.hostsock: HostSocket | None = None
        self.env: dict[str, str] = {}
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._watch: LifelineWatch | None = None
        self.confinement = Confinement(p.probe, p.decision, None)
        self._renewer: asyncio.Task[None] | None = None
        self.grace = kill_grace(os.environ)
        self.rlimits = rlimit_plan(m.capabilities.resources)
        self.entry_pids: set[int] = set()
        self._spawning = 0
        self._reaper: asyncio.TimerHandle | None = None

    # -- tasks ------------------------------------------------------------------------------------

    async def _on_activate(self, task: DoorTask) -> None:
        self.current = task
        if task.turn > 1:
            return  # a continued task: its a2a_task_received and task_start came with its first message
        from_door = task.dialect is not None
        if from_door:
            self.trace.write(
                "a2a_task_received",
                {
                    "task_id": task.id,
                    "context_id": task.context_id,
                    "message_id": task.message_id,
                    "traceparent_from_caller": task.traceparent_from_caller,
                },
            )
        payload: dict[str, Any] = {
            "task_id": task.id,
            "context_id": task.context_id,
            "source": "a2a" if from_door else "task_md",
            "origin": task.origin.value,
            "trust": task.trust.value,
            "lane": task.lane.value,
        }
        if task.origin is Origin.COMPLETION and task.delegation_id:
            payload["delegation_id"] = task.delegation_id
        payload["message_parts_bytes"] = task.message_parts_bytes
        eid = self.trace.write("task_start", payload)
        self.task_nodes[task.id] = (eid, time.monotonic())

    async def _run_task(self, task: DoorTask) -> TaskOutcome:
        if self.stopping:
            return TaskOutcome.canceled("task canceled: the session is ending")
        if task.origin is Origin.COMPLETION:
            # A delegation's outcome is news for the session, not work for the entrypoint:
            # running the entrypoint on it would make a delegating script delegate again. It is
            # recorded (task_start with its delegation_id) and answered; `roost-capsule delegate
            # --wait` is how a script reads its child's result.
            return TaskOutcome.completed("completion recorded")
        request_file = self.p.records / INPUT_REQUEST_FILE
        await asyncio.to_thread(_fresh_request_file, request_file)
        env = {
            **self.env,
            "MURMUR_TASK_ID": task.id,
            "MURMUR_CONTEXT_ID": task.context_id,
            "MURMUR_TASK_TURN": str(task.turn),
            "MURMUR_INPUT_REQUEST": str(request_file),
        }
        launch = self._launch()
        pids: list[int] = []

        def started(pid: int) -> None:
            pids.append(pid)
            self.entry_pids.add(pid)
            self._spawning -= 1

        self._spawning += 1  # until its pid is known, no orphan reaping (it could be ours)
        try:
            result = await run_entrypoint(
                launch, text=task.text, cwd=self.p.workdir, env=env, grace=self.grace, on_start=started
            )
        finally:
            if not pids:
                self._spawning -= 1
            self.entry_pids.difference_update(pids)
        if result.ok:
            question = await asyncio.to_thread(_read_request, request_file)
            if question:  # the entrypoint asks for input: docs/a2a.md, "A script capsule that asks for input"
                return TaskOutcome.input_required(question)
            write_results(self.p.workdir, result.stdout, ok=True, job_id=self.job_id)
            return TaskOutcome.completed(result.stdout)
        reason = result.failure()
        sep = "" if not result.stdout or result.stdout.endswith("\n") else "\n"
        write_results(self.p.workdir, result.stdout + sep + reason + "\n", ok=False, job_id=self.job_id)
        return TaskOutcome.failed(reason)

    def _launch(self) -> Launch:
        """The entrypoint's argv and the hook that binds it before exec (rlimits, parent death,
        and the session's containment class)."""
        rlimits = self.rlimits

        def bind() -> None:
            libc_prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            apply_rlimits(rlimits)

        assert self.hostsock is not None
        argv, preexec, fds, done = self.confinement.launch_parts(
            list(self.p.argv), workdir=self.p.workdir, socket_path=self.hostsock.path, rlimits=bind
        )
        return Launch(argv, preexec=preexec, pass_fds=fds, after_spawn=done)

    # -- the entrypoints' subtree -----------------------------------------------------------------

    def _reap(self) -> None:
        """Collect orphans the kernel re-parented to us (we are their subreaper), every second."""
        if not self._spawning:
            reap_orphans(self.entry_pids)
        self._reaper = asyncio.get_running_loop().call_later(REAP_EVERY_SECS, self._reap)

    def _hard_exit(self, status: int) -> None:
        """The lifeline's last resort: SIGKILL the whole subtree first, then leave."""
        for proc in descendants():
            with contextlib.suppress(Exception):
                proc.kill()
        os._exit(status)

    async def _on_finish(self, task: DoorTask, outcome: TaskOutcome) -> None:
        if outcome.state in (TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED):
            self.current = None  # the task waits for its next message; it has not ended
            return
        self._task_end(task.id, outcome.state)
        self.last_state = outcome.state
        self.current = None
        if task.id == self.initial_id:
            self.initial_done.set()

    def _task_end(self, task_id: str, state: TaskState) -> None:
        node, started = self.task_nodes.pop(task_id, (None, time.monotonic()))
        counts = dict.fromkeys(self.totals, 0)
        self.trace.write(
            "task_end",
            {
                "task_id": task_id,
                "exit_status": EXIT_STATUS.get(state, "failed"),
                "duration_ms": int((time.monotonic() - started) * 1000),
                **counts,
                "reopen_count": 0,
            },
            parent_id=node,
        )
        for key, value in counts.items():
            self.totals[key] += value

    def _traceparent(self) -> str | None:
        return self.current.trace.format() if self.current is not None else None

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
        _say("spawner lifeline closed — the session that delegated to this one has ended")
        payload: dict[str, Any] = {}
        if self.p.handle is not None:
            payload = {"spawned_by": self.p.handle.session_id, "delegation_id": self.p.handle.delegation_id}
        self.trace.write("spawner_ended", payload)

    async def _cancel_running(self) -> None:
        running = self.door.running
        if running is not None:
            with contextlib.suppress(JsonRpcError):
                await self.door.cancel(running.id)

    # -- daemon -----------------------------------------------------------------------------------

    async def _register(self, capsule_url: str) -> None:
        p = self.p
        required = self.delegated or bool(p.manifest.capabilities.spawn.allow)
        if p.roost_url is None:
            if required:
                raise LaunchRefused(register_refusal("<unset>", "MURMUR_ROOST_URL is not set"))
            return
        body = {
            "containment": p.decision.achieved,
            "session_id": p.session_id,
            "name": p.manifest.name,
            "version": p.manifest.version,
            "workdir": str(p.workdir),
            "pid": os.getpid(),
            "capsule_url": capsule_url,
        }
        headers = {"x-murmur-spawn-approval": p.approval} if p.approval else {}
        assert self._http is not None
        try:
            async with self._http.post(
                p.roost_url + "/register", json=body, headers=headers, timeout=REGISTER_TIMEOUT
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise LaunchRefused(register_refusal(p.roost_url, str(exc) or type(exc).__name__)) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("credential"), str):
            err = answer.get("error") if isinstance(answer, dict) else None
            reason = f"{status} {err}" if isinstance(err, str) else f"it answered HTTP {status}"
            raise LaunchRefused(register_refusal(p.roost_url, reason))
        self.credential = answer["credential"]
        door_key = answer.get("door_key")
        if isinstance(door_key, str) and len(door_key) == 64:
            with contextlib.suppress(ValueError):
                self.door.seal_key = bytes.fromhex(door_key)  # relayed stamps are believed only when sealed
        self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        """Renew this session's lease while it runs (harmless when roost watches the pid instead).

        The first call learns the lease's length; later ones come every third of it."""
        every = 0.0
        while self.credential is not None and self.p.roost_url is not None and self._http is not None:
            await asyncio.sleep(every)
            every = 60.0
            try:
                async with self._http.post(
                    self.p.roost_url + "/renew", headers={CREDENTIAL_HEADER: self.credential}, timeout=RENEW_TIMEOUT
                ) as resp:
                    answer = await resp.json(content_type=None) if resp.status == 200 else None
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
                continue
            secs = answer.get("lease_secs") if isinstance(answer, dict) else None
            if isinstance(secs, int | float) and secs > 0:
                every = max(1.0, secs / 3)

    async def _deregister(self, outcome: str) -> None:
        if self.credential is None or self.p.roost_url is None or self._http is None:
            return
        try:
            async with self._http.post(
                self.p.roost_url + "/deregister",
                json={"outcome": outcome},
                headers={CREDENTIAL_HEADER: self.credential},
                timeout=DEREGISTER_TIMEOUT,
            ) as resp:
                await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            _say(f"could not deregister from mur-roost at {self.p.roost_url}: {exc or type(exc).__name__}")

    # -- the session ------------------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop, "signal")
        if not become_subreaper():
            _say("could not become a child subreaper; a descendant that leaves its session may outlive it")
        self._reaper = loop.call_later(REAP_EVERY_SECS, self._reap)
        self._http = aiohttp.ClientSession()
        try:
            return await self._run()
        finally:
            await self._cleanup()

    async def _start_listeners(self) -> str:
        self._runner = web.AppRunner(self.door.app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        url = f"http://127.0.0.1:{port}"
        self.door.url = url
        self.hostsock = HostSocket(
            self.p.records,
            daemon_url=self.p.roost_url,
            credential=lambda: self.credential,
            traceparent=self._traceparent,
        )
        await self.hostsock.start()
        return url

    async def _run(self) -> int:
        p = self.p
        m = p.manifest
        try:
            url = await self._start_listeners()
            await self._register(url)
        except LaunchRefused as exc:
            _say(str(exc))
            return 1
        assert self.hostsock is not None
        self.env = task_env(
            os.environ,
            {
                "MURMUR_JOB_ID": self.job_id,
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
                path_env=self.env.get("PATH", os.defpath),
                daemon_port=_port_of(p.roost_url),
                door_port=_port_of(url),
            )
        self.confinement.grants = grants
        start: dict[str, Any] = {
            "capsule_name": m.name,
            "capsule_version": m.version,
            "capabilities": _categories(m),
            "containment_declared": d.declared,
            "containment_achieved": d.achieved,
            "userns_grant": p.probe.userns_grant,
            "workdir_exec": m.capabilities.filesystem.workdir_exec,
            "effective_grants": effective_grants(m, p.probe, d, grants),
            "resumed_from": None,
            "context_id": None,
        }
        if p.handle is not None:
            start["spawned_by"] = p.handle.session_id
            start["delegation_id"] = p.handle.delegation_id
        self.trace.write("session_start", start, parent_id=None)
        if p.opts.json:
            sys.stdout.write(json.dumps({"session_id": p.session_id, "capsule_url": url}, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        else:
            _say(f"session {p.session_id} of {m.coordinates} is serving its A2A door at {url}")
        if p.lifeline_fd is not None:
            self._watch = LifelineWatch(p.lifeline_fd, lambda: self._stop("lifeline"))
            self._watch.start()
        initial = await asyncio.to_thread(read_initial_task, p.workdir)
        if initial is not None:
            self.initial_id = self.door.submit(initial.text).id
        if m.lifecycle.after_task == "exit":
            if initial is not None:
                await _first(self.initial_done.wait(), self.stop_event.wait())
            self._stop("natural")
        await self.stop_event.wait()
        return await self._end()

    async def _end(self) -> int:
        p = self.p
        self.door.close()
        if self.stopping:
            await self._cancel_running()
        await self.door.drain()
        await self.door.shutdown()
        for task_id in list(self.task_nodes):  # tasks still waiting for input end with the session
            self._task_end(task_id, TaskState.CANCELED)
        reason = self.stop_reason
        last = EXIT_STATUS.get(self.last_state, "failed") if self.last_state is not None else "ok"
        duration = int((time.monotonic() - p.started_mono) * 1000)
        self.trace.write(
            "session_end",
            {f"total_{k}": v for k, v in self.totals.items()} | {"duration_ms": duration, "exit_status": last},
        )
        self.trace.close()  # session_end is the file's last line
        ok = self.last_state is TaskState.COMPLETED
        if reason == "natural":
            if p.handle is not None:
                await self._report_completion(ok, duration)
            await self._deregister("complete" if ok or self.last_state is None else "failed")
            return 0 if ok or self.last_state is None else 1
        await self._deregister("failed")
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
        async with A2AClient(total_timeout=10.0) as client:
            final = await report(client, p.handle, p.workdir, rec)
        if final.delivery_error is not None:
            _say(
                f"delegation {rec.delegation_id}: the completion could not be delivered to {p.handle.url}: "
                f"{final.delivery_error}; recorded in {p.workdir / 'completion.json'}"
            )

    async def _cleanup(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        if self._reaper is not None:
            self._reaper.cancel()
        if descendants():
            await kill_tree(None, grace=self.grace, keep=self.entry_pids)
        if self._watch is not None:
            self._watch.stop()
        if self.hostsock is not None:
            await self.hostsock.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()


def libc_prctl(option: int, arg: int) -> None:
    """``prctl(option, arg)`` in the forked child; raises OSError so the spawn fails loudly."""
    if _LIBC.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_LIBC = ctypes.CDLL(None, use_errno=True)


INPUT_REQUEST_FILE = "input-request.txt"


def _fresh_request_file(path: Path) -> None:
    """Blocking: remove a question an earlier run left behind."""
    path.unlink(missing_ok=True)


def _read_request(path: Path) -> str | None:
    """Blocking: the entrypoint's question, if it wrote one (then the file is consumed)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    path.unlink(missing_ok=True)
    return text or None


async def loopback_owner(request: web.Request) -> str | None:
    """The door's ``identify``: a direct caller owns its tasks by the uid behind its connection."""
    uid = caller_of(request).uid
    return f"uid:{uid}" if uid is not None else None


async def _first(*aws: Any) -> None:
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
        _say(str(exc))
        asyncio.run(_refuse_containment(exc))
        return 1
    except LaunchRefused as exc:
        _say(str(exc))
        return 1
    return asyncio.run(Host(prepared).run())
