"""A capsule session's A2A door: JSON-RPC over HTTP in front of the :class:`~a2a.taskqueue.TaskQueue` it holds.

Why it looks like this (``docs/a2a.md`` has the whole contract):

* Both dialects are served on ``POST /``; every answer is in the dialect of the method name
  (0.3 ``message/send`` …, 1.0 ``SendMessage`` … which need ``A2A-Version: 1.0``). Every
  operation the card declares unsupported answers its specific error, never -32601.
* A send blocks until the task is terminal or interrupted unless the caller asks for an
  immediate answer (1.0 ``returnImmediately: true``; 0.3 blocks only on ``blocking: true``),
  and never longer than ``blocking_cap_secs``: then the task is answered as it stands.
* The door believes ``x-murmur-task-origin``/``-trust`` only under a valid relay seal
  (:mod:`a2a.protocol.seal`); anything else is untrusted. Tasks belong to their creator — the sealing
  session, or the identity the pluggable ``identify`` callable finds for a direct caller — and
  are visible (get, list, cancel, continue) only to it; others get -32001.
* No exception text or traceback ever reaches a client (-32603 ``internal error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, NamedTuple, Unpack

from aiohttp import HttpVersion11, web
from multidict import CIMultiDictProxy

from a2a.protocol import errors, inbound, jsonrpc, listing, seal, traceparent
from a2a.protocol.card import CARD_PATH, LEGACY_CARD_PATH, build_card
from a2a.protocol.models import Dialect, Message, Task, dump_task
from a2a.protocol.origin import ORIGIN_HEADER, TRUST_HEADER, Origin, Provenance
from a2a.protocol.pushconfig import MAX_CONFIGS_PER_TASK, PushConfig, dump_config, field, parse_config, parse_inner
from a2a.protocol.rpcmethods import (
    OPS,
    STREAMING,
    UNSUPPORTED,
    is_v1,
    request_versions,
    send_configuration,
    send_push_config,
    supported_version,
    task_id_param,
)
from a2a.protocol.tasktypes import BUSY, CLOSING, CancelPhase, DoorTask, Incoming, Runner, TaskOutcome
from a2a.push import PushDelivery
from a2a.sse import DEFAULT_HEARTBEAT_SECS, stream_task
from a2a.taskqueue import QueueOptions, TaskQueue
from a2a.taskrecord import TaskRecord

__all__ = [
    "BUSY",
    "CLOSING",
    "PEER_NOT_ACCEPTED_BODY",
    "CancelPhase",
    "Door",
    "DoorTask",
    "Identify",
    "TaskOutcome",
    "request_versions",
]

log = logging.getLogger("a2a.door")

DELEGATION_HEADER = "x-murmur-delegation-id"
COMPLETION_SESSION_HEADER = "x-murmur-completion-session"
DEFAULT_BLOCKING_CAP_SECS = 120.0

PEER_NOT_ACCEPTED_BODY = (
    b'{"error":"peer_not_accepted","message":"this capsule does not accept tasks from peers '
    b'(exports.peer_tasks.accept is not true)"}'
)

Identify = Callable[[web.BaseRequest], Awaitable[str | None]]
"""Who a direct (unsealed) caller is, as an owner key such as ``uid:1000``; None if unknown."""

TAKES_NO_TASKS = "this capsule takes no tasks from callers (task_acceptance: none); its card lists no send method"
UNSEALED = Provenance.from_wire(None, None)
"""What an unsealed (or wrongly sealed) caller is, whatever origin it claims: ``event``, untrusted.

So a local process that skips the relay cannot take the peer lane's priority, nor pose as a
delegation's completion (no delegation id is recorded from it)."""
JSON_TYPE = "application/json"


class Caller(NamedTuple):
    """Who sent a request: how its task is classified, and which tasks it may see (a named
    tuple: one is built per request)."""

    provenance: Provenance
    owner: str | None


class _Sent(NamedTuple):
    """A send's params, checked: what admission needs (one is built per send)."""

    message: Message
    block: bool
    history: int | None
    config: PushConfig | None
    sealed: str | None
    subject: str


class _Stream(NamedTuple):
    """What a streaming method answers: the task to stream, in the caller's dialect."""

    rec: TaskRecord
    dialect: Dialect
    history_length: int | None


_NOBODY_IN_PARTICULAR = Caller(UNSEALED, None)
"""Every unsealed caller of a door without ``identify``: one scope (a library default)."""


def _internal_error(req: jsonrpc.Request) -> bytes:
    """-32603 for a request the door failed on; the traceback goes to the log only."""
    log.exception("A2A door failed on a request")
    return jsonrpc.error_body(req.id, errors.internal_error())


def _not_found() -> web.Response:
    return web.Response(status=404)


_CARD_PATHS = (CARD_PATH, LEGACY_CARD_PATH)
_CARD_METHODS = ("GET", "HEAD")


async def _answer_expect(request: web.BaseRequest) -> None:
    """``Expect: 100-continue`` on a send: tell the client to go on with its body, as aiohttp's
    router would (HTTP/1.1 only); any other expectation is refused with 417."""
    expect = request.headers.get("Expect", "")
    if request.version != HttpVersion11:
        return
    if expect.lower() != "100-continue":
        raise web.HTTPExpectationFailed(text="the door supports only the expectation 100-continue")
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the answer proper has not started


_PUSH_VERBS = {
    "CreateTaskPushNotificationConfig": "set",
    "SetTaskPushNotificationConfig": "set",
    "GetTaskPushNotificationConfig": "get",
    "ListTaskPushNotificationConfig": "list",
    "ListTaskPushNotificationConfigs": "list",
    "DeleteTaskPushNotificationConfig": "delete",
    "tasks/pushNotificationConfig/set": "set",
    "tasks/pushNotificationConfig/get": "get",
    "tasks/pushNotificationConfig/list": "list",
    "tasks/pushNotificationConfig/delete": "delete",
}


def _turn_of(rec: TaskRecord, message_id: str) -> int:
    """Which run of ``rec`` the message ``message_id`` is (0: one that has run already)."""
    if rec.task.message_id == message_id:
        return rec.task.turn
    for queued in rec.next_turns or ():
        if queued.message_id == message_id:
            return queued.turn
    return 0


def _json(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


class Door:
    """The A2A door of one capsule session. Serve :attr:`app`; feed tasks to ``runner``.

    The door holds its tasks in :attr:`queue` (admission, lanes, the worker, the store) and adds
    what HTTP needs: parsing, scoping by caller, the card, serialising in the caller's dialect.
    """

    def __init__(
        self,
        *,
        name: str,
        version: str,
        session_id: str,
        runner: Runner,
        peer_tasks_accept: bool = False,
        url: str | None = None,
        description: str | None = None,
        blocking_cap_secs: float = DEFAULT_BLOCKING_CAP_SECS,
        seal_key: bytes | None = None,
        identify: Identify | None = None,
        heartbeat_secs: float = DEFAULT_HEARTBEAT_SECS,
        push: PushDelivery | None = None,
        **queue: Unpack[QueueOptions],
    ) -> None:
        self.queue = TaskQueue(name=name, runner=runner, **queue)
        self.name = name
        self.version = version
        self.session_id = session_id
        self.peer_tasks_accept = peer_tasks_accept
        self.description = description
        self.blocking_cap_secs = blocking_cap_secs
        self.heartbeat_secs = heartbeat_secs
        self.push = push  # None: push notifications are not offered (the card says so)
        self.seal_key = seal_key
        self._identify = identify
        self._owners: weakref.WeakKeyDictionary[Any, Caller] = weakref.WeakKeyDictionary()  # by connection
        self._url = url
        self._card_cache: tuple[str, bytes] | None = None
        self._app: web.Application | None = None

    # -- public surface for the capsule host ------------------------------------------------------

    @property
    def app(self) -> web.Application:
        """The door as an :class:`aiohttp.web.Application`, for a caller that composes apps (e.g.
        mounts it as a sub-application under an interface path). The same routes as :meth:`handle`,
        relative to where the app is mounted; the capsule host serves :meth:`handle` itself."""
        if self._app is None:
            app = web.Application()
            app.router.add_post("/", self._handle_post)
            app.router.add_get(CARD_PATH, self._handle_card)
            app.router.add_get(LEGACY_CARD_PATH, self._handle_card)
            app.router.add_route("*", "/{tail:.*}", self._handle_not_found)
            app.on_cleanup.append(self._on_cleanup)
            self._app = app
        return self._app

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Every request the door serves: ``POST /`` (JSON-RPC), ``GET``/``HEAD`` of the two card
        paths, 404 for anything else.

        A plain aiohttp request handler: the door has three routes, so it matches them itself
        instead of paying an Application's router and middleware chain on every request.
        """
        path = request.path
        method = request.method
        if path == "/":
            if method == "POST":
                if request.headers.get("Expect") is not None:
                    await _answer_expect(request)
                return await self._handle_post(request)
        elif path in _CARD_PATHS and method in _CARD_METHODS:
            return await self._handle_card(request)
        return _not_found()

    @property
    def url(self) -> str | None:
        return self._url

    @url.setter
    def url(self, value: str) -> None:
        """Set once the site is bound (``http://127.0.0.1:<port>``); the card advertises it."""
        self._url = value
        self._card_cache = None

    @property
    def running(self) -> DoorTask | None:
        """The task whose run is under way, if any."""
        return self.queue.running

    def close(self) -> None:
        """Stop admission (:meth:`TaskQueue.close`)."""
        self.queue.close()

    async def drain(self) -> None:
        """Wait until nothing is queued or running."""
        await self.queue.drain()

    async def shutdown(self) -> None:
        """Stop the worker; tasks still queued, running or interrupted are recorded canceled (and
        their push notifications get a short grace to go out)."""
        await self.queue.shutdown()
        if self.push is not None:
            await self.push.close()

    def submit(
        self,
        text: str,
        *,
        provenance: Provenance | None = None,
        context_id: str | None = None,
        message_id: str | None = None,
        caller_traceparent: str | None = None,
    ) -> Task:
        """Admit a task that did not come over HTTP (task.md / input.json); see ``submit_local``."""
        return self.queue.submit_local(
            text,
            provenance=provenance,
            context_id=context_id,
            message_id=message_id,
            caller_traceparent=caller_traceparent,
        ).to_task()

    def get(self, task_id: str) -> Task | None:
        """Any kept task by id, unscoped (the capsule host's own view)."""
        rec = self.queue.record(task_id)
        return rec.to_task() if rec is not None else None

    async def cancel(self, task_id: str) -> Task:
        """Cancel by id, unscoped; JsonRpcError -32001 unknown / -32002 already terminal."""
        return (await self.queue.cancel_id(task_id)).to_task()

    # -- HTTP handlers -----------------------------------------------------------------------------

    async def _on_cleanup(self, _app: web.Application) -> None:
        await self.shutdown()

    async def _handle_not_found(self, _request: web.BaseRequest) -> web.Response:
        return _not_found()

    async def _handle_card(self, request: web.BaseRequest) -> web.Response:
        url = self._url or f"http://{request.host}"
        cached = self._card_cache
        if cached is not None and cached[0] == url:
            return _json(cached[1])
        card = build_card(
            name=self.name,
            version=self.version,
            url=url,
            session_id=self.session_id,
            accepts_tasks=self.queue.task_acceptance != "none",
            peer_tasks=self.peer_tasks_accept,
            description=self.description,
            push_notifications=self.push is not None,
        )
        body = jsonrpc.dumps(card.to_json())
        if self._url is not None:
            self._card_cache = (url, body)
        return _json(body)

    async def _handle_post(self, request: web.BaseRequest) -> web.StreamResponse:
        headers = request.headers
        origin_raw = headers.get(ORIGIN_HEADER)
        if not self.peer_tasks_accept and origin_raw is not None and origin_raw.lower() == "peer":
            return web.Response(status=403, body=PEER_NOT_ACCEPTED_BODY, content_type="application/json")
        if headers.get("Content-Type") != JSON_TYPE and request.content_type != JSON_TYPE:  # the usual value first
            return web.Response(status=404)
        try:
            parsed = jsonrpc.parse_body(await request.read())
        except jsonrpc.RequestError as exc:
            return (
                web.Response(status=204) if exc.notification else _json(jsonrpc.error_body(exc.request_id, exc.error))
            )
        if isinstance(parsed, jsonrpc.Request):  # the usual body: one request (:meth:`_answer`, inline)
            try:
                result = await self._dispatch(parsed, request, streamable=True)
                if type(result) is _Stream:
                    if parsed.notification:
                        return web.Response(status=204)
                    heartbeat = self.heartbeat_secs
                    return await stream_task(
                        request,
                        result.rec,
                        result.dialect,
                        parsed.id,
                        history_length=result.history_length,
                        heartbeat_secs=heartbeat,
                    )
                body = jsonrpc.result_body(parsed.id, result)
            except errors.JsonRpcError as exc:
                body = jsonrpc.error_body(parsed.id, exc)
            except web.HTTPException:
                raise
            except Exception:
                body = _internal_error(parsed)
            return web.Response(status=204) if parsed.notification else _json(body)
        answers = await asyncio.gather(*(self._answer_member(m, request) for m in parsed))
        bodies = [b for b in answers if b is not None]
        if not bodies:  # JSON-RPC 2.0 §6: a batch of notifications gets nothing back
            return web.Response(status=204)
        return _json(b"[" + b",".join(bodies) + b"]")

    async def _answer_member(self, member: jsonrpc.Member, request: web.BaseRequest) -> bytes | None:
        if isinstance(member, jsonrpc.RequestError):
            return None if member.notification else jsonrpc.error_body(member.request_id, member.error)
        return await self._answer(member, request)

    async def _answer(self, req: jsonrpc.Request, request: web.BaseRequest) -> bytes | None:
        """The response body for one request; None for a notification (JSON-RPC 2.0 §4.1: never answered,
        whatever went wrong)."""
        try:
            body = jsonrpc.result_body(req.id, await self._dispatch(req, request))
        except errors.JsonRpcError as exc:
            body = jsonrpc.error_body(req.id, exc)
        except web.HTTPException:  # e.g. 413 for a body over client_max_size: not a JSON-RPC answer
            raise
        except Exception:
            body = _internal_error(req)
        return None if req.notification else body

    # -- dispatch ----------------------------------------------------------------------------------

    async def _dispatch(self, req: jsonrpc.Request, request: web.BaseRequest, *, streamable: bool = False) -> Any:
        """The result of one request (a :class:`_Stream` for a streaming method when ``streamable``:
        a request alone in its body; a batch member cannot stream)."""
        method = req.method
        versions = request_versions(request.headers)
        version = versions[0] if len(versions) == 1 else ""
        if version != "1.0":  # the usual header needs none of these checks
            if len(versions) > 1:
                raise errors.version_not_supported(", ".join(versions))
            if version and not supported_version(version):
                raise errors.version_not_supported(version)
        op = OPS.get(method)
        if op is None:
            raise errors.method_not_found()
        kind, dialect = op
        if dialect == "1.0" and version != "1.0" and not is_v1(version):
            raise errors.version_header_required(method, version or None)
        params = req.params
        if kind == "send":
            return await self._send(params, request, dialect, req.notification)
        if kind in STREAMING:
            if not streamable and not req.notification:
                raise errors.unsupported_operation(UNSUPPORTED["batched_stream"])
            if kind == "stream":
                sent = self._parse_send(params, request, dialect)
                caller = self._known_caller(request, sent.subject, sent.sealed) or await self._looked_up_caller(request)
                rec, _ = self._take(sent, caller, request.headers, dialect)
                return _Stream(rec, dialect, sent.history or 0)
            task_id = task_id_param(params, method)
            rec = await self._visible(task_id, request, task_id)
            if rec.state.terminal:
                raise errors.unsupported_operation(
                    f"task {task_id} is {rec.state.value}, a terminal state, so there is nothing to subscribe to"
                )
            return _Stream(rec, dialect, 0)
        if kind == "get":
            task_id = task_id_param(params, method)
            rec = await self._visible(task_id, request, task_id)
            return dump_task(rec.to_task(history_length=listing.history_length(params)), dialect)
        if kind == "cancel":
            task_id = task_id_param(params, method)
            rec = await self._visible(task_id, request, task_id)
            return dump_task((await self.queue.cancel_record(rec)).to_task(), dialect)
        if kind == "list":
            return await self._list(params, request, dialect)
        if kind == "push":
            return await self._push_config(method, params, request, dialect)
        if kind == "extended_card" and dialect == "0.3":
            raise errors.authenticated_extended_card_not_configured()
        raise errors.unsupported_operation(UNSUPPORTED[kind])

    async def _caller(self, request: web.BaseRequest, subject: str) -> Caller:
        known = self._known_caller(request, subject, request.headers.get(seal.SEAL_HEADER))
        return known or await self._looked_up_caller(request)

    async def _looked_up_caller(self, request: web.BaseRequest) -> Caller:
        """An unsealed caller whose owner ``identify`` finds."""
        return Caller(UNSEALED, await self._identity(request))

    def _known_caller(self, request: web.BaseRequest, subject: str, sealed: str | None) -> Caller | None:
        """The caller when no lookup is needed (a valid seal, no ``identify``, or a connection whose
        owner was looked up before); None → :meth:`_caller`.

        A send asks this first, so the usual request does not pay for a coroutine it never suspends in.
        """
        if sealed is not None:  # the x-murmur-task-seal header
            headers = request.headers
            origin = headers.get(ORIGIN_HEADER)
            trust = headers.get(TRUST_HEADER)
            sender = seal.verify(
                self.seal_key,
                sealed,
                receiver=self.session_id,
                origin=origin,
                trust=trust,
                traceparent=headers.get("traceparent"),
                subject=subject,
            )
            if sender is not None:
                return Caller(Provenance.from_wire(origin, trust), f"session:{sender}")
        if self._identify is None:
            return _NOBODY_IN_PARTICULAR
        transport = request.transport
        return self._owners.get(transport) if transport is not None else None  # a connection seen before

    async def _identity(self, request: web.BaseRequest) -> str | None:
        """The direct caller's owner key, looked up once per connection (:meth:`_known_caller`
        answers from that cache without a coroutine)."""
        if self._identify is None:
            return None
        owner = await self._identify(request)
        transport = request.transport
        if transport is not None:
            self._owners[transport] = Caller(UNSEALED, owner)
        return owner

    async def _visible(self, task_id: str, request: web.BaseRequest, subject: str) -> TaskRecord:
        caller = await self._caller(request, subject)
        rec = self.queue.record(task_id)
        if rec is None or rec.task.owner != caller.owner:
            raise errors.task_not_found()
        return rec

    async def _list(self, params: dict[str, Any], request: web.BaseRequest, dialect: Dialect) -> dict[str, Any]:
        query = listing.parse_list(params)
        owner = (await self._caller(request, "")).owner
        mine = [r for r in self.queue.records() if r.task.owner == owner]
        page, total, token = listing.select(mine, query)
        history = query.history_length
        return {
            "tasks": [
                dump_task(r.to_task(history_length=history, include_artifacts=query.include_artifacts), dialect)
                for r in page
                if isinstance(r, TaskRecord)
            ],
            "nextPageToken": token,
            "pageSize": query.page_size,
            "totalSize": total,
        }

    async def _send(
        self, params: dict[str, Any], request: web.BaseRequest, dialect: Dialect, notification: bool
    ) -> Any:
        sent = self._parse_send(params, request, dialect)
        caller = self._known_caller(request, sent.subject, sent.sealed) or await self._looked_up_caller(request)
        rec, turn = self._take(sent, caller, request.headers, dialect)
        if sent.block and not notification and not rec.settled:  # nobody waits for a notification's answer
            with contextlib.suppress(TimeoutError):  # at the cap the task is answered as it stands
                async with asyncio.timeout(self.blocking_cap_secs):
                    await (rec.wait_settled() if turn is None else rec.wait_turn(turn))
        task = rec.wire(dialect, sent.history or 0)
        return {"task": task} if dialect == "1.0" else task  # as dump_send_result has it

    def _parse_send(self, params: dict[str, Any], request: web.BaseRequest, dialect: Dialect) -> _Sent:
        """A send's params checked (-32602/-32004/-32005 with a sentence), nothing admitted yet."""
        if self.queue.task_acceptance == "none":
            raise errors.unsupported_operation(TAKES_NO_TASKS)
        try:
            message = inbound.parse_message(params.get("message"), dialect)
        except ValueError as exc:
            raise errors.invalid_params(str(exc)) from None
        for part in message.parts:
            if part.file is not None and part.file.bytes is not None:
                raise errors.content_type_not_supported("inline file bytes are not accepted; send a uri")
        configuration = params.get("configuration")
        push = self.push
        block, history = send_configuration(configuration, dialect, push=push is not None)
        config = None
        if push is not None:
            pushed = send_push_config(configuration)
            if pushed is not None:
                config = self._checked_config(parse_inner(pushed, "", dialect, "configuration.pushNotificationConfig"))
        headers = request.headers
        sealed = headers.get(seal.SEAL_HEADER)  # the subject costs a digest: only a seal needs it
        subject = seal.send_subject(message, headers.get(DELEGATION_HEADER)) if sealed is not None else ""
        return _Sent(message, block, history, config, sealed, subject)

    def _take(
        self, sent: _Sent, caller: Caller, headers: CIMultiDictProxy[str], dialect: Dialect
    ) -> tuple[TaskRecord, int | None]:
        """Admit (or continue, or recognise as a replay) a send's message: its task, and the turn it
        is (None for a message that opened the task). No await: nothing changes meanwhile."""
        message = sent.message
        replayed = self.queue.replayed(caller.owner, message.message_id)
        rec = replayed if replayed is not None else self._accept(message, caller, headers, dialect)
        if sent.config is not None and replayed is None:
            self._keep_config(rec, replace(sent.config, task_id=rec.task.id))
        return rec, (_turn_of(rec, message.message_id) if message.task_id else None)

    # -- push-notification configs -----------------------------------------------------------------

    def _checked_config(self, config: PushConfig) -> PushConfig:
        assert self.push is not None
        refusal = self.push.refusal(config.url)
        if refusal is not None:
            raise errors.invalid_params(refusal)
        return config

    def _keep_config(self, rec: TaskRecord, config: PushConfig) -> None:
        assert self.push is not None
        kept = rec.push_configs if rec.push_configs is not None else []
        same = [c for c in kept if c.id == config.id]
        if not same and len(kept) >= MAX_CONFIGS_PER_TASK:
            raise errors.invalid_params(
                f"task {rec.task.id} already has {MAX_CONFIGS_PER_TASK} push notification configs; delete one first"
            )
        for old in same:
            kept.remove(old)
            self.push.detach(rec, old.id)
        kept.append(config)
        rec.push_configs = kept
        self.push.attach(rec, config)

    async def _push_config(
        self, method: str, params: dict[str, Any], request: web.BaseRequest, dialect: Dialect
    ) -> Any:
        """The push-notification config methods of both dialects (-32003 when push is not offered)."""
        if self.push is None:
            raise errors.push_notification_not_supported()
        verb = _PUSH_VERBS[method]
        if verb == "set":
            config = self._checked_config(parse_config(params, dialect))
            rec = await self._visible(config.task_id, request, config.task_id)
            self._keep_config(rec, config)
            return dump_config(config, dialect)
        key = "taskId" if dialect == "1.0" else "id"
        task_id = field(params, key)
        if not isinstance(task_id, str) or not task_id:
            raise errors.invalid_params(f"{method} requires {key}")
        rec = await self._visible(task_id, request, task_id)
        kept = rec.push_configs or []
        if verb == "list":
            shown = [dump_config(c, dialect) for c in kept]
            return {"configs": shown, "nextPageToken": ""} if dialect == "1.0" else shown
        config_id = field(params, "id" if dialect == "1.0" else "pushNotificationConfigId")
        if config_id is not None and not isinstance(config_id, str):
            raise errors.invalid_params("the push notification config id must be a string")
        found = [c for c in kept if c.id == config_id or (config_id is None and verb == "get")]
        if not found and verb == "get" and dialect == "0.3":
            found = kept[:1]  # as the official 0.3 SDK answers a get: the task's config, whatever id is named
        if not found:
            raise errors.task_not_found()
        if verb == "get":
            return dump_config(found[0], dialect)
        kept.remove(found[0])
        self.push.detach(rec, found[0].id)
        return None

    def _accept(self, message: Message, caller: Caller, headers: CIMultiDictProxy[str], dialect: Dialect) -> TaskRecord:
        """Admit a new message, or continue the task it names (no await: nothing changes meanwhile)."""
        provenance = caller.provenance
        delegation_id: str | None = None
        if provenance.origin is Origin.COMPLETION:
            addressed = headers.get(COMPLETION_SESSION_HEADER)
            if not addressed or addressed.lower() != self.session_id.lower():
                raise errors.completion_misaddressed(addressed)
            delegation_id = headers.get(DELEGATION_HEADER) or None
        raw_tp = headers.get("traceparent")
        raw_tp = raw_tp.lower() if raw_tp is not None else None
        parent = traceparent.parse(raw_tp)
        tracestate = headers.get("tracestate") if parent is not None else None
        if tracestate is not None and not traceparent.valid_tracestate(tracestate):
            tracestate = None
        trace = parent.child() if parent is not None else traceparent.new()
        if not message.task_id:  # the usual message opens a task: admit without an Incoming
            return self.queue.admit_fields(
                message, provenance, raw_tp, trace, tracestate, delegation_id, dialect, caller.owner
            )
        rec = self.queue.record(message.task_id)
        if rec is None or rec.task.owner != caller.owner:
            raise errors.task_not_found()
        if message.context_id and message.context_id != rec.task.context_id:
            raise errors.invalid_params(
                f"message.contextId {message.context_id!r} is not the context of task {message.task_id}"
            )
        incoming = Incoming(message, provenance, raw_tp, trace, tracestate, delegation_id, dialect, caller.owner)
        return self.queue.continue_task(rec, incoming)
