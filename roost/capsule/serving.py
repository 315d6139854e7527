"""The session's tasks: what the door runs for each message, and the trace records around it.

The door (``a2a.door``) queues and schedules tasks; :class:`TaskServer` is its runner and its
activate/finish hooks. Each message runs the entrypoint once, under the session's containment,
with the task's id, context and turn in its environment; its stdout is the answer, streamed to
the door as it is written (at most the per-task output cap is kept), and a question it leaves in
``MURMUR_INPUT_REQUEST`` turns the task ``input-required``. A task's earlier turns are in the
file ``MURMUR_TASK_HISTORY`` names (docs/a2a.md, "What an entrypoint sees").

Trace appends are done inline on the loop: each is one small ``O_APPEND`` write, cheaper than a
thread hop, and inline keeps the record order identical to the order of events.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from a2a.door import DEFAULT_BLOCKING_CAP_SECS, Door, DoorTask, TaskOutcome
from a2a.protocol.models import TaskState
from a2a.protocol.origin import Origin
from a2a.protocol.tasktypes import CancelPhase
from a2a.push import PushDelivery
from roost.capsule.entrypoint import DEFAULT_OUTPUT_CAP, EntrypointResult, Launch, run_entrypoint
from roost.capsule.limits import LimitCounters, apply_rlimits, read_counters
from roost.capsule.otelspans import SessionSpans
from roost.capsule.prepare import Prepared
from roost.capsule.reaper import kill_tree
from roost.capsule.sandbox import Confinement
from roost.capsule.shellline import shell_line
from roost.capsule.taskinput import write_results
from roost.capsule.writecap import WriteWatch, over_sentence
from roost.core.limits import declared, which_limit
from roost.core.wire import BLOCKING_CAP_ENV, FINAL_JOB_STATES
from roost.http.caller import caller_of
from roost.observe.tracelines import TraceWriter
from roost.system.jobpeer import descends_from

__all__ = [
    "BLOCKING_CAP_ENV",
    "EXIT_STATUS",
    "INPUT_REQUEST_FILE",
    "OUTPUT_CAP_ENV",
    "TaskServer",
    "blocking_cap",
    "build_door",
    "libc_prctl",
    "loopback_owner",
]

EXIT_STATUS = {TaskState.COMPLETED: "ok", TaskState.FAILED: "failed", TaskState.CANCELED: "canceled"}
PR_SET_PDEATHSIG = 1
INPUT_REQUEST_FILE = "input-request.txt"
TURNS_DIR = "turns"  # under the records dir: one JSON Lines file of earlier turns per task
OUTPUT_CAP_ENV = "MURMUR_A2A_OUTPUT_CAP_BYTES"


def output_cap_sentence(cap: int) -> str:
    return (
        f"the entrypoint wrote more than {cap} bytes to stdout for this task; the task keeps the first "
        f"{cap} (the per-task output cap, {OUTPUT_CAP_ENV}) and the rest was dropped"
    )


class TaskServer:
    """Runs each task's entrypoint and writes its ``task_start``/``task_end``; keeps the totals."""

    def __init__(
        self,
        p: Prepared,
        trace: TraceWriter,
        *,
        job_id: str | None,
        confinement: Confinement,
        grace: float,
        rlimits: list[tuple[int, int, int]],
        is_stopping: Callable[[], bool],
    ) -> None:
        self.p = p
        self.trace = trace
        self.job_id = job_id
        self.confinement = confinement
        self.grace = grace
        self.rlimits = rlimits
        self._is_stopping = is_stopping
        self.env: dict[str, str] = {}  # the entrypoints' base environment, set once registered
        self.socket_path: Path | None = None  # the host socket, set once it listens
        self.current: DoorTask | None = None
        self.initial_id: str | None = None
        self.initial_done = asyncio.Event()
        self.last_state: TaskState | None = None
        self.task_nodes: dict[str, tuple[str, float]] = {}
        self.totals = dict.fromkeys(("turns", "input_tokens", "output_tokens", "tool_calls", "shell_calls"), 0)
        self.entry_pids: set[int] = set()
        self.entry_trust: dict[int, str] = {}  # entrypoint pid -> the trust of the task it runs
        self.entry_tasks: dict[int, str] = {}  # entrypoint pid -> the id of the task it runs
        # Per task, the delegations it started that have not ended yet (ordered: a dict of ids).
        self.in_flight: dict[str, dict[str, None]] = {}
        self.spawning = 0  # entrypoints started whose pid is not known yet
        self.shell_calls: dict[str, int] = {}  # entrypoint runs (``shell`` lines) per task
        self.last_returncode: int | None = None  # the last entrypoint's exit status (negative: signal)
        self.spans: SessionSpans | None = None  # the manifest's otel_endpoint (roost/capsule/otelspans.py)
        self.output_cap = output_cap(os.environ)
        self.output_used: dict[str, int] = {}  # bytes of stdout kept per task, over its turns
        self.write_output: Callable[[str, str], None] = _nowhere  # the door's, once it is built

    async def on_activate(self, task: DoorTask) -> None:
        self.current = task
        if self.spans is not None:
            self.spans.started(task)
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
        payload: dict[str, object] = {
            "task_id": task.id,
            "context_id": task.context_id,
            "source": "a2a" if from_door else "task_md",
            "origin": task.origin.value,
            "trust": task.trust.value,
            "lane": task.lane.value,
        }
        if task.origin is Origin.COMPLETION and task.delegation_id:
            payload["delegation_id"] = task.delegation_id
            self._delegation_over(task.delegation_id)  # its outcome is here: no longer in flight
        payload["message_parts_bytes"] = task.message_parts_bytes
        eid = self.trace.write("task_start", payload)
        self.task_nodes[task.id] = (eid, time.monotonic())

    async def run_task(self, task: DoorTask) -> TaskOutcome:
        if self._is_stopping():
            return TaskOutcome.canceled("task canceled: the session is ending")
        if task.origin is Origin.COMPLETION:
            # A delegation's outcome is news for the session, not work for the entrypoint:
            # running the entrypoint on it would make a delegating script delegate again. It is
            # recorded (task_start with its delegation_id) and answered; `roost-capsule delegate
            # --wait` is how a script reads its child's result.
            return TaskOutcome.completed("completion recorded")
        request_file = self.p.records / INPUT_REQUEST_FILE
        history_file = self.p.records / TURNS_DIR / f"{task.id}.jsonl"
        await asyncio.to_thread(_fresh_request_file, request_file)
        env = {
            **self.env,
            "MURMUR_TASK_ID": task.id,
            "MURMUR_CONTEXT_ID": task.context_id,
            "MURMUR_TASK_TURN": str(task.turn),
            "MURMUR_INPUT_REQUEST": str(request_file),
            "MURMUR_TASK_HISTORY": str(history_file),
        }
        launch = self._launch()
        pids: list[int] = []

        def started(pid: int) -> None:
            pids.append(pid)
            self.entry_pids.add(pid)
            self.entry_trust[pid] = task.trust.value
            self.entry_tasks[pid] = task.id
            self.spawning -= 1

        def output(text: str) -> None:
            self.write_output(task.id, text)

        used = self.output_used.get(task.id, 0)
        self.spawning += 1  # until its pid is known, no orphan reaping (it could be ours)
        caps = self.p.manifest.capabilities.resources
        before, t0 = read_counters(caps), time.monotonic()
        watch = self._write_watch(pids)
        try:
            result = await run_entrypoint(
                launch,
                text=task.text,
                cwd=self.p.workdir,
                env=env,
                grace=self.grace,
                on_start=started,
                on_output=output,
                output_cap=self.output_cap - used,
            )
        finally:
            if watch is not None:
                await watch.close()
            if not pids:
                self.spawning -= 1
            self.entry_pids.difference_update(pids)
            for pid in pids:
                self.entry_trust.pop(pid, None)
                self.entry_tasks.pop(pid, None)
        self._shell_line(task, result, t0, read_counters(caps).since(before))
        self.last_returncode = result.returncode
        self.output_used[task.id] = used + len(result.stdout.encode())
        note = output_cap_sentence(self.output_cap) if result.truncated else None
        await asyncio.to_thread(_record_turn, history_file, task.turn, task.text, result.stdout)
        if result.ok:
            question = await asyncio.to_thread(_read_request, request_file)
            if question:  # the entrypoint asks for input: docs/a2a.md, "A script capsule that asks for input"
                return TaskOutcome.input_required(question)
            write_results(self.p.workdir, result.stdout, ok=True, job_id=self.job_id)
            return TaskOutcome(TaskState.COMPLETED, result.stdout, status_text=note)
        reason = result.failure() if watch is None or watch.over is None else over_sentence(watch.over, watch.cap)
        if note is not None:
            reason = f"{reason}; {note}"
        sep = "" if not result.stdout or result.stdout.endswith("\n") else "\n"
        write_results(self.p.workdir, result.stdout + sep + reason + "\n", ok=False, job_id=self.job_id)
        return TaskOutcome.failed(reason)

    def _write_watch(self, pids: list[int]) -> WriteWatch | None:
        """The ``max_workdir_bytes`` watch for one task, started; None when none is declared."""
        cap = self.p.manifest.capabilities.resources.max_workdir_bytes
        if cap is None:
            return None

        async def stop() -> None:
            await kill_tree(pids[0] if pids else None, grace=self.grace, keep=tuple(pids))

        watch = WriteWatch(self.p.workdir, cap, stop)
        watch.start()
        return watch

    def _shell_line(self, task: DoorTask, result: EntrypointResult, t0: float, hits: LimitCounters) -> None:
        """The run's ``shell`` line, with the limit the kernel's evidence names (roost/capsule/shellline.py)."""
        fields = {d.field for d in declared(self.p.manifest.capabilities.resources)}
        signum = -result.returncode if result.returncode < 0 else None
        hit = which_limit(fields, signal_number=signum, pids_hits=hits.pids_hits, oom_kills=hits.oom_kills)
        line = shell_line(
            turn=max(0, task.turn - 1),
            task_id=task.id,
            argv=self.p.argv,
            result=result,
            duration_ms=int((time.monotonic() - t0) * 1000),
            resource_limit=hit,
        )
        node = self.task_nodes.get(task.id)
        if node is not None:
            self.trace.write("shell", line, parent_id=node[0])
        else:
            self.trace.write("shell", line)
        self.shell_calls[task.id] = self.shell_calls.get(task.id, 0) + 1

    def _launch(self) -> Launch:
        """The entrypoint's argv and the hook that binds it before exec (rlimits, parent death,
        and the session's containment class)."""
        rlimits = self.rlimits

        def bind() -> None:
            libc_prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            apply_rlimits(rlimits)

        assert self.socket_path is not None
        argv, preexec, fds, done = self.confinement.launch_parts(
            list(self.p.argv), workdir=self.p.workdir, socket_path=self.socket_path, rlimits=bind
        )
        return Launch(argv, preexec=preexec, pass_fds=fds, after_spawn=done)

    async def on_finish(self, task: DoorTask, outcome: TaskOutcome) -> None:
        if outcome.state in (TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED):
            self.current = None  # the task waits for its next message; it has not ended
            return
        self.output_used.pop(task.id, None)
        self.in_flight.pop(task.id, None)
        await asyncio.to_thread(_forget_turns, self.p.records / TURNS_DIR / f"{task.id}.jsonl")
        self.task_end(task.id, outcome.state)
        if self.spans is not None:
            await self.spans.finished(task, EXIT_STATUS.get(outcome.state, "failed"))
        self.last_state = outcome.state
        self.current = None
        if task.id == self.initial_id:
            self.initial_done.set()

    async def on_cancel(self, task: DoorTask, phase: CancelPhase) -> None:
        """Seed 000's ``task_canceled``: where a task a caller cancelled (``tasks/cancel``) stopped,
        before its ``task_end`` (a task cancelled while queued never started: this line is its only
        record). The session's own ending cancels what runs too; that is no caller's cancel."""
        if self._is_stopping():
            return
        node = self.task_nodes.get(task.id)
        started = node is not None
        where = "turn" if phase == "running" else ("input" if started else "queued")
        payload: dict[str, object] = {"task_id": task.id}
        if started:
            payload["turn"] = max(0, task.turn - 1)
        # A script capsule demotes no shell command, so it has no detached work to name.
        payload |= {"phase": where, "detached_work_ids": [], "delegation_ids": list(self.in_flight.get(task.id, ()))}
        if node is not None:
            self.trace.write("task_canceled", payload, parent_id=node[0])
        else:
            self.trace.write("task_canceled", payload)

    def task_end(self, task_id: str, state: TaskState) -> None:
        node, started = self.task_nodes.pop(task_id, (None, time.monotonic()))
        counts = dict.fromkeys(self.totals, 0)
        counts["shell_calls"] = self.shell_calls.pop(task_id, 0)
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

    def job_seen(self, pid: int | None, view: dict[str, Any], started: bool) -> None:
        """The host socket's hook (roost/capsule/hostsock.py): a job view the daemon answered to
        the process ``pid``. A delegation it ``started`` is in flight for the task that process
        runs (or descends from); one seen in a final state is no longer in flight for any task."""
        dlg, state = view.get("delegation_id"), view.get("state")
        if not isinstance(dlg, str) or not dlg:
            return
        if state in FINAL_JOB_STATES:
            self._delegation_over(dlg)
            return
        if started:
            found = descends_from(pid, self.entry_tasks.keys())
            task_id = self.entry_tasks.get(found) if found is not None else None
            if task_id is not None:
                self.in_flight.setdefault(task_id, {})[dlg] = None

    def _delegation_over(self, delegation_id: str) -> None:
        for ids in self.in_flight.values():
            ids.pop(delegation_id, None)

    def trust_of_caller(self, pid: int | None) -> str | None:
        """The trust of the task whose running entrypoint ``pid`` is or descends from; None when
        it descends from none (the host socket then refuses it)."""
        found = descends_from(pid, self.entry_trust.keys())
        return self.entry_trust.get(found) if found is not None else None

    def traceparent(self) -> str | None:
        return self.current.trace.format() if self.current is not None else None


def build_door(p: Prepared, tasks: TaskServer, push: PushDelivery | None = None) -> Door:
    """The session's A2A door as the manifest declares it, running tasks through ``tasks`` and
    posting push notifications through ``push``."""
    m = p.manifest
    door = Door(
        name=m.name,
        version=m.version,
        session_id=p.session_id,
        runner=tasks.run_task,
        task_acceptance=m.lifecycle.task_acceptance,
        queue_depth=m.lifecycle.queue_depth,
        peer_tasks_accept=m.exports.peer_tasks.accept,
        description=m.description,
        on_activate=tasks.on_activate,
        on_finish=tasks.on_finish,
        on_cancel=tasks.on_cancel,
        identify=loopback_owner,
        local_owner=f"uid:{os.getuid()}",
        blocking_cap_secs=blocking_cap(os.environ),
        push=push,
    )
    tasks.write_output = door.queue.write_output
    return door


def blocking_cap(env: Mapping[str, str]) -> float:
    """How long a blocking send may hold the door (docs/a2a.md): the env value if it is a positive
    number of seconds, else the door's default."""
    raw = env.get(BLOCKING_CAP_ENV, "").strip()
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_BLOCKING_CAP_SECS
    return value if 0 < value < float("inf") else DEFAULT_BLOCKING_CAP_SECS


def output_cap(env: Mapping[str, str]) -> int:
    """The per-task cap on kept stdout (docs/a2a.md): the env value if it is a positive integer
    number of bytes, else the default (1 MiB)."""
    raw = env.get(OUTPUT_CAP_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_OUTPUT_CAP


def _nowhere(_task_id: str, _text: str) -> None:
    """Output before the door is built goes nowhere (the door sets the real sink)."""


async def loopback_owner(request: web.BaseRequest) -> str | None:
    """The door's ``identify``: a direct caller owns its tasks by the uid behind its connection."""
    uid = caller_of(request).uid
    return f"uid:{uid}" if uid is not None else None


def libc_prctl(option: int, arg: int) -> None:
    """``prctl(option, arg)`` in the forked child; raises OSError so the spawn fails loudly."""
    if _LIBC.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_LIBC = ctypes.CDLL(None, use_errno=True)


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


def _record_turn(path: Path, turn: int, text: str, output: str) -> None:
    """Blocking: append one turn (the message, then what the entrypoint wrote) to the task's history file."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    lines = [
        {"turn": turn, "role": "user", "text": text},
        {"turn": turn, "role": "agent", "text": output},
    ]
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


def _forget_turns(path: Path) -> None:
    """Blocking: the task ended; its history file goes (the task's history stays in the door)."""
    path.unlink(missing_ok=True)
