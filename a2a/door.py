"""A capsule session's A2A door: an aiohttp app that admits tasks into a three-lane queue.

Why it looks like this:

* The door answers a send at once (``submitted``, or a *successful* ``rejected`` result when
  there is no room) and runs tasks one at a time in a worker coroutine, so a caller never waits
  for the work and the official SDK's 5 s timeout is never hit.
* Classification comes from headers only, through :class:`~a2a.origin.Provenance`; the lane
  (user → peer → bg, FIFO within a lane, never preempted) follows from the origin.
* Both dialects are served on ``POST /`` and every answer is in the dialect of the method name
  (0.3 ``message/send`` …, 1.0 ``SendMessage`` … which need ``A2A-Version: 1.0``).
* Cancel is recorded synchronously; ``canceled`` wins over whatever the runner reports later.
* The hot path is stdlib ``json`` plus hand-written checks; nothing logs per request above
  DEBUG; no exception text or traceback ever reaches a client (-32603 ``internal error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web

from a2a import errors, jsonrpc, traceparent
from a2a.card import CARD_PATH, LEGACY_CARD_PATH, build_card
from a2a.ids import prefixed
from a2a.models import (
    Artifact,
    Dialect,
    Message,
    Part,
    Task,
    TaskState,
    TaskStatus,
    agent_message,
    dump_send_result,
    dump_task,
    parse_message_lean,
)
from a2a.origin import LANE_ORDER, ORIGIN_HEADER, TRUST_HEADER, Lane, Origin, Provenance, Trust

log = logging.getLogger("a2a.door")

DELEGATION_HEADER = "x-murmur-delegation-id"
COMPLETION_SESSION_HEADER = "x-murmur-completion-session"
VERSION_HEADER = "A2A-Version"

TaskAcceptance = Literal["single", "queue", "none"]
CancelPhase = Literal["queued", "running"]

BUSY = "task rejected: capsule is busy"
CLOSING = "task rejected: the session is closing"
PEER_NOT_ACCEPTED_BODY = (
    b'{"error":"peer_not_accepted","message":"this capsule does not accept tasks from peers '
    b'(exports.peer_tasks.accept is not true)"}'
)

_SEND = {"message/send": "0.3", "SendMessage": "1.0"}
_GET = {"tasks/get": "0.3", "GetTask": "1.0"}
_CANCEL = {"tasks/cancel": "0.3", "CancelTask": "1.0"}
_V1_METHODS = frozenset({"SendMessage", "GetTask", "CancelTask"})


@dataclass(frozen=True, slots=True)
class DoorTask:
    """Everything the capsule host needs to start a task and write its trace records."""

    id: str
    context_id: str
    message_id: str
    text: str
    parts: tuple[Part, ...]
    provenance: Provenance
    lane: Lane
    traceparent_from_caller: str | None
    trace: traceparent.TraceParent
    tracestate: str | None
    delegation_id: str | None
    received_at_ms: int
    dialect: Dialect | None

    @property
    def origin(self) -> Origin:
        return self.provenance.origin

    @property
    def trust(self) -> Trust:
        return self.provenance.trust

    @property
    def message_parts_bytes(self) -> int:
        return len(self.text.encode())


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """What a runner reports. ``output`` becomes the ``response`` artifact of a completed task."""

    state: TaskState
    output: str = ""
    artifacts: tuple[Artifact, ...] | None = None
    status_text: str | None = None

    def __post_init__(self) -> None:
        if self.state not in (TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED):
            raise ValueError(f"a task outcome is completed, failed or canceled, not {self.state.value}")

    @classmethod
    def completed(cls, output: str = "") -> TaskOutcome:
        return cls(TaskState.COMPLETED, output)

    @classmethod
    def failed(cls, reason: str) -> TaskOutcome:
        return cls(TaskState.FAILED, status_text=reason)

    @classmethod
    def canceled(cls, reason: str = "task canceled") -> TaskOutcome:
        return cls(TaskState.CANCELED, status_text=reason)


Runner = Callable[[DoorTask], Coroutine[Any, Any, TaskOutcome]]
ActivateHook = Callable[[DoorTask], Awaitable[None]]
FinishHook = Callable[[DoorTask, TaskOutcome], Awaitable[None]]
CancelHook = Callable[[DoorTask, CancelPhase], Awaitable[None]]


class _Record:
    __slots__ = ("artifacts", "run", "state", "status_text", "task", "timestamp")

    def __init__(self, task: DoorTask, state: TaskState, status_text: str | None = None) -> None:
        self.task = task
        self.state = state
        self.status_text = status_text
        self.artifacts: list[Artifact] | None = None
        self.timestamp = _now()
        self.run: asyncio.Task[TaskOutcome] | None = None

    def set(self, state: TaskState, status_text: str | None = None) -> None:
        self.state = state
        self.status_text = status_text
        self.timestamp = _now()

    def to_task(self) -> Task:
        t = self.task
        message: Message | None = agent_message(f"msg_{t.id}_status", self.status_text) if self.status_text else None
        return Task.model_construct(
            id=t.id,
            context_id=t.context_id,
            status=TaskStatus.model_construct(state=self.state, message=message, timestamp=self.timestamp),
            artifacts=self.artifacts,
            history=None,
            metadata=None,
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


class Door:
    """The A2A door of one capsule session. Serve :attr:`app`; feed tasks to ``runner``."""

    def __init__(
        self,
        *,
        name: str,
        version: str,
        session_id: str,
        runner: Runner,
        task_acceptance: TaskAcceptance = "queue",
        queue_depth: int = 16,
        peer_tasks_accept: bool = False,
        url: str | None = None,
        description: str | None = None,
        on_activate: ActivateHook | None = None,
        on_finish: FinishHook | None = None,
        on_cancel: CancelHook | None = None,
        max_finished: int = 1000,
    ) -> None:
        if task_acceptance not in ("single", "queue", "none"):
            raise ValueError(f"task_acceptance must be single, queue or none, not {task_acceptance!r}")
        if queue_depth < 1:
            raise ValueError("queue_depth must be at least 1")
        self.name = name
        self.version = version
        self.session_id = session_id
        self.task_acceptance: TaskAcceptance = task_acceptance
        self.queue_depth = queue_depth
        self.peer_tasks_accept = peer_tasks_accept
        self.description = description
        self._url = url
        self._card_cache: tuple[str, bytes] | None = None
        self._runner = runner
        self._on_activate = on_activate
        self._on_finish = on_finish
        self._on_cancel = on_cancel
        self._max_finished = max_finished
        self._lanes: dict[Lane, deque[_Record]] = {lane: deque() for lane in LANE_ORDER}
        self._pending = 0
        self._ever_held = False
        self._closed = False
        self._running: _Record | None = None
        self._live: dict[str, _Record] = {}
        self._finished: OrderedDict[str, _Record] = OrderedDict()
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self.idle = asyncio.Event()
        self.idle.set()
        self._app: web.Application | None = None

    # -- public surface for the capsule host ------------------------------------------------------

    @property
    def app(self) -> web.Application:
        if self._app is None:
            app = web.Application()
            app.router.add_post("/", self._handle_post)
            app.router.add_get(CARD_PATH, self._handle_card)
            app.router.add_get(LEGACY_CARD_PATH, self._handle_card)
            app.router.add_route("*", "/{tail:.*}", self._handle_not_found)
            app.on_cleanup.append(self._on_cleanup)
            self._app = app
        return self._app

    @property
    def url(self) -> str | None:
        return self._url

    @url.setter
    def url(self, value: str) -> None:
        """Set once the site is bound (``http://127.0.0.1:<port>``); the card advertises it."""
        self._url = value
        self._card_cache = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        """Tasks admitted and not yet started."""
        return self._pending

    @property
    def running(self) -> DoorTask | None:
        return self._running.task if self._running is not None else None

    def close(self) -> None:
        """Stop admission: every later send gets ``rejected`` / ``the session is closing``."""
        self._closed = True

    async def drain(self) -> None:
        """Wait until nothing is queued or running (admission may still be open)."""
        await self.idle.wait()

    async def wait_idle(self) -> None:
        await self.idle.wait()

    def submit(
        self,
        text: str,
        *,
        provenance: Provenance | None = None,
        context_id: str | None = None,
        message_id: str | None = None,
        caller_traceparent: str | None = None,
    ) -> Task:
        """Admit a task that did not come over HTTP (task.md / input.json): user/trusted by default.

        Same capacity rules as ``message/send`` except that ``task_acceptance: none`` does not
        apply (it only closes the door to callers).
        """
        parts = (Part.model_construct(kind="text", text=text, file=None, data=None, metadata=None),)
        tp = traceparent.parse(caller_traceparent)
        return self._admit(
            message_id=message_id or prefixed("msg"),
            context_id=context_id,
            text=text,
            parts=parts,
            provenance=provenance or Provenance.local_user(),
            raw_traceparent=caller_traceparent,
            trace=tp.child() if tp else traceparent.new(),
            tracestate=None,
            delegation_id=None,
            dialect=None,
        ).to_task()

    def get(self, task_id: str) -> Task | None:
        rec = self._live.get(task_id) or self._finished.get(task_id)
        return rec.to_task() if rec is not None else None

    async def cancel(self, task_id: str) -> Task:
        """Cancel a queued or running task; JsonRpcError -32001 unknown / -32002 already terminal."""
        rec = self._live.get(task_id)
        if rec is None or rec.state is TaskState.CANCELED:
            done = rec or self._finished.get(task_id)
            if done is None:
                raise errors.task_not_found()
            raise errors.task_not_cancelable(task_id, done.state.value)
        phase: CancelPhase
        if rec is self._running:
            phase = "running"
            rec.set(TaskState.CANCELED, "task canceled")
            if rec.run is not None:
                rec.run.cancel()
        else:
            phase = "queued"
            self._lanes[rec.task.lane].remove(rec)
            self._pending -= 1
            rec.set(TaskState.CANCELED, "task canceled while queued")
            self._retire(rec)
            if self._running is None and self._pending == 0:
                self.idle.set()
        snapshot = rec.to_task()
        if self._on_cancel is not None:
            try:
                await self._on_cancel(rec.task, phase)
            except Exception:
                log.exception("on_cancel hook failed for %s", task_id)
        return snapshot

    async def shutdown(self) -> None:
        """Stop the worker; tasks still queued or running are recorded canceled."""
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        for rec in list(self._live.values()):
            rec.set(TaskState.CANCELED, "task canceled: the session ended")
            self._retire(rec)
        for lane in self._lanes.values():
            lane.clear()
        self._pending = 0
        self._running = None
        self.idle.set()

    # -- HTTP handlers -----------------------------------------------------------------------------

    async def _on_cleanup(self, _app: web.Application) -> None:
        await self.shutdown()

    async def _handle_not_found(self, _request: web.Request) -> web.Response:
        return web.Response(status=404)

    async def _handle_card(self, request: web.Request) -> web.Response:
        url = self._url or f"http://{request.host}"
        cached = self._card_cache
        if cached is not None and cached[0] == url:
            return _json(cached[1])
        card = build_card(
            name=self.name,
            version=self.version,
            url=url,
            session_id=self.session_id,
            accepts_tasks=self.task_acceptance != "none",
            peer_tasks=self.peer_tasks_accept,
            description=self.description,
        )
        body = jsonrpc.dumps(card.to_json())
        if self._url is not None:
            self._card_cache = (url, body)
        return _json(body)

    async def _handle_post(self, request: web.Request) -> web.Response:
        headers = request.headers
        origin_raw = headers.get(ORIGIN_HEADER)
        if not self.peer_tasks_accept and origin_raw is not None and origin_raw.lower() == "peer":
            return web.Response(status=403, body=PEER_NOT_ACCEPTED_BODY, content_type="application/json")
        if request.content_type != "application/json":
            return web.Response(status=404)
        request_id: jsonrpc.JsonId = None
        try:
            req = jsonrpc.parse_request(await request.read())
            request_id = req.id
            result = await self._dispatch(req, headers)
            return _json(jsonrpc.result_body(request_id, result))
        except jsonrpc.RequestError as exc:
            return _json(jsonrpc.error_body(exc.request_id, exc.error))
        except errors.JsonRpcError as exc:
            return _json(jsonrpc.error_body(request_id, exc))
        except web.HTTPException:  # e.g. 413 for a body over client_max_size: not a JSON-RPC answer
            raise
        except Exception:
            log.exception("A2A door failed on a request")
            return _json(jsonrpc.error_body(request_id, errors.internal_error()))

    # -- dispatch ----------------------------------------------------------------------------------

    async def _dispatch(self, req: jsonrpc.Request, headers: Mapping[str, str]) -> Any:
        method = req.method
        versions = request_versions(headers)
        if len(versions) > 1:
            raise errors.version_not_supported(", ".join(versions))
        version = versions[0] if versions else ""
        if version and not _supported_version(version):
            raise errors.version_not_supported(version)
        if method in _V1_METHODS and not _is_v1(version):
            raise errors.version_header_required(method, version or None)
        dialect: Dialect
        if method in _SEND:
            dialect = "1.0" if _SEND[method] == "1.0" else "0.3"
            return dump_send_result(self._send(req.params, headers, dialect).to_task(), dialect)
        if method in _GET:
            dialect = "1.0" if _GET[method] == "1.0" else "0.3"
            task = self.get(_task_id(req.params, method))
            if task is None:
                raise errors.task_not_found()
            return dump_task(task, dialect)
        if method in _CANCEL:
            dialect = "1.0" if _CANCEL[method] == "1.0" else "0.3"
            return dump_task(await self.cancel(_task_id(req.params, method)), dialect)
        raise errors.method_not_found()

    def _send(self, params: dict[str, Any], headers: Mapping[str, str], dialect: Dialect) -> _Record:
        if self.task_acceptance == "none":
            raise errors.method_not_found()
        provenance = Provenance.from_wire(headers.get(ORIGIN_HEADER), headers.get(TRUST_HEADER))
        delegation_id: str | None = None
        if provenance.origin is Origin.COMPLETION:
            addressed = headers.get(COMPLETION_SESSION_HEADER)
            if not addressed or addressed.lower() != self.session_id.lower():
                raise errors.completion_misaddressed(addressed)
            delegation_id = headers.get(DELEGATION_HEADER) or None
        raw_message = params.get("message", params)  # era-B peers may put the message fields in params
        try:
            message = parse_message_lean(raw_message)
        except ValueError as exc:
            raise errors.invalid_params(str(exc)) from None
        for part in message.parts:
            if part.file is not None and part.file.bytes is not None:
                raise errors.content_type_not_supported("inline file bytes are not accepted; send a uri")
        raw_tp = headers.get("traceparent")
        raw_tp = raw_tp.lower() if raw_tp is not None else None
        caller = traceparent.parse(raw_tp)
        tracestate = headers.get("tracestate") if caller is not None else None
        if tracestate is not None and not traceparent.valid_tracestate(tracestate):
            tracestate = None
        return self._admit(
            message_id=message.message_id,
            context_id=message.context_id,
            text=message.text,
            parts=tuple(message.parts),
            provenance=provenance,
            raw_traceparent=raw_tp,
            trace=caller.child() if caller is not None else traceparent.new(),
            tracestate=tracestate,
            delegation_id=delegation_id,
            dialect=dialect,
        )

    # -- queue -------------------------------------------------------------------------------------

    def _refusal(self) -> str | None:
        if self._closed:
            return CLOSING
        if self.task_acceptance == "single":
            return BUSY if self._ever_held else None
        return BUSY if self._pending >= self.queue_depth else None

    def _admit(
        self,
        *,
        message_id: str,
        context_id: str | None,
        text: str,
        parts: tuple[Part, ...],
        provenance: Provenance,
        raw_traceparent: str | None,
        trace: traceparent.TraceParent,
        tracestate: str | None,
        delegation_id: str | None,
        dialect: Dialect | None,
    ) -> _Record:
        task = DoorTask(
            id=prefixed("tsk"),
            context_id=context_id or prefixed("ctx"),
            message_id=message_id,
            text=text,
            parts=parts,
            provenance=provenance,
            lane=provenance.lane,
            traceparent_from_caller=raw_traceparent,
            trace=trace,
            tracestate=tracestate,
            delegation_id=delegation_id,
            received_at_ms=time.time_ns() // 1_000_000,
            dialect=dialect,
        )
        refusal = self._refusal()
        if refusal is not None:
            rec = _Record(task, TaskState.REJECTED, refusal)
            self._remember(rec)
            return rec
        rec = _Record(task, TaskState.SUBMITTED)
        self._ever_held = True
        self._live[task.id] = rec
        self._lanes[task.lane].append(rec)
        self._pending += 1
        self.idle.clear()
        self._wake.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=f"a2a-door-{self.name}")
        return rec

    def _remember(self, rec: _Record) -> None:
        self._finished[rec.task.id] = rec
        while len(self._finished) > self._max_finished:
            self._finished.popitem(last=False)

    def _retire(self, rec: _Record) -> None:
        self._live.pop(rec.task.id, None)
        self._remember(rec)

    def _next(self) -> _Record | None:
        for lane in LANE_ORDER:
            queue = self._lanes[lane]
            if queue:
                self._pending -= 1
                return queue.popleft()
        return None

    async def _work(self) -> None:
        while True:
            rec = self._next()
            if rec is None:
                self.idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._run(rec)

    async def _run(self, rec: _Record) -> None:
        self._running = rec
        rec.set(TaskState.WORKING)
        task = rec.task
        outcome: TaskOutcome
        try:
            if self._on_activate is not None:
                await self._on_activate(task)
        except Exception:
            log.exception("on_activate hook failed for %s", task.id)
            outcome = TaskOutcome.failed("task failed to start")
        else:
            if rec.state is TaskState.CANCELED:
                outcome = TaskOutcome.canceled()
            else:
                outcome = await self._invoke(rec)
        if rec.state is TaskState.CANCELED:  # canceled always wins over what the runner said
            outcome = TaskOutcome.canceled(rec.status_text or "task canceled")
        self._finish(rec, outcome)
        self._running = None
        if self._on_finish is not None:
            try:
                await self._on_finish(task, outcome)
            except Exception:
                log.exception("on_finish hook failed for %s", task.id)

    async def _invoke(self, rec: _Record) -> TaskOutcome:
        run = asyncio.get_running_loop().create_task(self._runner(rec.task), name=f"a2a-task-{rec.task.id}")
        rec.run = run
        try:
            await asyncio.wait((run,))
        except asyncio.CancelledError:  # the door itself is shutting down
            run.cancel()
            with contextlib.suppress(BaseException):
                await run
            raise
        if run.cancelled():
            return TaskOutcome.canceled()
        exc = run.exception()
        if exc is not None:
            log.error("runner failed for %s", rec.task.id, exc_info=exc)
            return TaskOutcome.failed("task failed: the runner raised an error")
        outcome: object = run.result()
        if not isinstance(outcome, TaskOutcome):  # an untyped runner may return anything
            log.error("runner for %s returned %r, not a TaskOutcome", rec.task.id, type(outcome))
            return TaskOutcome.failed("task failed: the runner returned no outcome")
        return outcome

    def _finish(self, rec: _Record, outcome: TaskOutcome) -> None:
        if outcome.state is TaskState.COMPLETED:
            artifacts = list(outcome.artifacts) if outcome.artifacts is not None else None
            if artifacts is None and outcome.output:
                artifacts = [_response_artifact(outcome.output)]
            rec.artifacts = artifacts
            rec.set(TaskState.COMPLETED, outcome.status_text or outcome.output or None)
        elif outcome.state is TaskState.FAILED:
            rec.set(TaskState.FAILED, outcome.status_text or outcome.output or "task failed")
        else:
            rec.set(TaskState.CANCELED, outcome.status_text or "task canceled")
        self._retire(rec)


def _response_artifact(text: str) -> Artifact:
    part = Part.model_construct(kind="text", text=text, file=None, data=None, metadata=None)
    return Artifact.model_construct(artifact_id="response", name="response", description=None, parts=[part])


def request_versions(headers: Mapping[str, str]) -> list[str]:
    """Every non-empty ``A2A-Version`` header value (a repeated header counts as conflicting)."""
    getall = getattr(headers, "getall", None)
    values: list[str] = getall(VERSION_HEADER, []) if getall is not None else []
    if getall is None and VERSION_HEADER in headers:
        values = [headers[VERSION_HEADER]]
    return [v.strip() for v in values if v.strip()]


def _is_v1(version: str) -> bool:
    return version == "1.0" or version.startswith("1.0.")


def _supported_version(version: str) -> bool:
    return _is_v1(version) or version == "0.3" or version.startswith("0.3.")


def _task_id(params: dict[str, Any], method: str) -> str:
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise errors.invalid_params(f"{method} requires an id")
    return task_id
