"""The A2A relay: sends ``message/send``, ``tasks/get`` and ``tasks/cancel`` on a session's behalf.

Why the daemon does this rather than the capsule: the receiving door derives a task's origin and
trust from ``x-murmur-task-origin`` / ``x-murmur-task-trust`` (see :mod:`a2a.protocol.origin`). Only a sender
that cannot be told what to stamp keeps untrust from being laundered along a chain, so every
header that classifies the task is built here from the *session record* (its trust was fixed at
registration), never from the request: unknown body fields and caller ``x-murmur-*`` headers are
simply never read.

When the receiving door is a session this daemon registered, the stamp is sealed (a MAC under
that session's door key, :mod:`a2a.protocol.seal`): doors believe origin and trust only under a valid seal.

Other rules: the peer URL must be covered by the session's ``capabilities.network.allow``
before any connection (the card is read from it), and so must the interface URL the card
selects, which is the URL actually dialled; a ``traceparent`` is always sent (the caller's trace
continued when it is valid W3C, else a new trace); every send asks for an immediate answer;
``a2a_send`` is appended to the sender's ``trace.jsonl`` only after the peer returned a Task, so
a failed or refused send records nothing.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable
from typing import Any, NamedTuple, Protocol

import structlog
from yarl import URL

from a2a.client import A2AClient, Endpoint
from a2a.protocol import seal, traceparent
from a2a.protocol.errors import (
    A2AError,
    InvalidResponse,
    JsonRpcError,
    NoResult,
    PeerHTTPError,
    PeerUnreachable,
    UnsupportedPeerURL,
)
from a2a.protocol.models import Message, Task, build
from a2a.protocol.origin import Origin, Trust, outbound_headers
from a2a.protocol.traceparent import TraceParent
from roost.core.api_models import A2ATaskRequest
from roost.core.egress import Egress, Listener, egress_refusal, network_refusal
from roost.core.errors import BadGateway, BadRequest, Refused, RoostError
from roost.core.requests import SendRequest
from roost.observe.events import NO_PARENT, EventBus, ObservedError, Span
from roost.observe.metrics import Metrics
from roost.observe.tracesink import TraceSink
from roost.services.relayanswers import stream_item, task_answer
from roost.state.sessions import SessionRecord, SessionTable

__all__ = ["Authenticator", "DoorKeys", "Relay", "network_refusal"]

log = structlog.get_logger("roost.relay")


def stamp(trust: Trust, caller_traceparent: str | None, caller_tracestate: str | None) -> tuple[str, dict[str, str]]:
    """The outgoing headers (pure): trace context continued or new, origin ``peer``, the given trust."""
    sent, _, headers = stamp_in(trust, caller_traceparent, caller_tracestate, None)
    return sent.format(), headers


def stamp_in(
    trust: Trust, caller_traceparent: str | None, caller_tracestate: str | None, session: TraceParent | None
) -> tuple[TraceParent, TraceParent, dict[str, str]]:
    """:func:`stamp` continuing the caller's trace, else the sending session's (its job's span),
    else a new one; also the context of the relay's own span: the sent span id is its id, the span
    it continues is its parent (:data:`NO_PARENT`: a new trace's root)."""
    caller = traceparent.parse(caller_traceparent.strip().lower() if caller_traceparent else None)
    base = caller if caller is not None else session
    sent = base.child() if base is not None else traceparent.new()
    span = TraceParent("00", sent.trace_id, base.parent_id if base is not None else NO_PARENT, sent.flags)
    headers = outbound_headers(Origin.PEER, trust)
    headers["traceparent"] = sent.format()
    if caller is not None and caller_tracestate and traceparent.valid_tracestate(caller_tracestate):
        headers["tracestate"] = caller_tracestate
    return sent, span, headers


_TRUST = {t.value: t for t in Trust}
_PEER = Origin.PEER.value


def _failure(exc: A2AError) -> tuple[str, ObservedError]:
    """The 502 sentence (the peer's error or the network reason) and its observation."""
    if isinstance(exc, PeerUnreachable):
        return str(exc), ObservedError("PeerUnreachable", "network", retryable=True)
    if isinstance(exc, PeerHTTPError):
        return str(exc), ObservedError("PeerHTTPError", "provider", status_code=exc.status)
    if isinstance(exc, JsonRpcError):
        return str(exc), ObservedError("JsonRpcError", "provider", code=str(exc.code))
    return str(exc), ObservedError(type(exc).__name__, "validation")


def _attrs(session_id: str, method: str, peer_url: str) -> dict[str, Any]:
    return {"roost.relay.session_id": session_id, "roost.relay.method": method, "roost.relay.peer_url": peer_url}


class Authenticator(Protocol):
    """The relay's view of the referee: who a credential belongs to."""

    def authenticate(self, credential: str | None) -> SessionRecord: ...


class DoorKeys(Protocol):
    """The relay's view of the keys: the key a registered session's door checks seals with."""

    def door_key_for(self, session_id: str) -> bytes: ...


class PeerCredentials(Protocol):
    """The relay's view of the operator's peer credentials (roost/services/peerauth.py)."""

    async def headers(self, url: str, declared: frozenset[str]) -> dict[str, str]: ...


class Relay:
    """``POST /a2a/send``, ``/a2a/tasks/get``, ``/a2a/tasks/cancel`` for authenticated sessions."""

    def __init__(
        self,
        *,
        sessions: Authenticator,
        doors: DoorKeys,
        table: SessionTable,
        a2a: A2AClient,
        events: EventBus,
        metrics: Metrics,
        traces: TraceSink,
        may_launch: Callable[[int | None], bool] = lambda _uid: True,
        peer_auth: PeerCredentials | None = None,
    ) -> None:
        self._may_launch = may_launch
        self._sessions = sessions
        self._peer_auth = peer_auth
        self._door_keys = doors
        self._table = table
        self._a2a = a2a
        self._events = events
        self._metrics = metrics
        self._traces = traces
        self._doors: dict[str, str | None] = {}  # door origin -> the registered session serving it
        self._counted: dict[tuple[str, str], Any] = {}
        self.own: frozenset[Listener] = frozenset()  # the daemon's listeners, set once they are bound

    def peer_refusal(self, host: str, port: int) -> str | None:
        """The A2A client's check of the address each connection reached: never the daemon's own."""
        if not self.own:
            return None
        return Egress((), self.own).peer_refusal(f"http://{host}:{port}", host, port)

    def forget_doors(self, _rec: SessionRecord | None = None) -> None:
        """A session registered (its door may be at a known origin): look doors up afresh."""
        self._doors.clear()

    def _count(self, method: str, outcome: str) -> None:
        """Count a relay request; the labelled counters are looked up once (``labels`` is not cheap)."""
        children = self._counted
        child = children.get((method, outcome))
        if child is None:
            child = children[method, outcome] = self._metrics.relay_requests.labels(method, outcome)
        child.inc()

    # -- sealing ---------------------------------------------------------------------------------

    def _receiver(self, url: str) -> str | None:
        """The running session whose door is at ``url``'s origin, if this daemon registered one."""
        origin = _origin(url)
        table = self._table
        if origin in self._doors:
            sid = self._doors[origin]
            rec = table.running_session(sid) if sid is not None else None
            if sid is None or (rec is not None and rec.capsule_url and _origin(rec.capsule_url) == origin):
                return sid
        found = next(
            (
                r.session_id
                for r in table.sessions.values()
                if r.running and r.capsule_url and _origin(r.capsule_url) == origin
            ),
            None,
        )
        if len(self._doors) >= 4096:  # origins dialled since the last registration: stay bounded
            self._doors.clear()
        self._doors[origin] = found
        return found

    def _trust(self, sender: SessionRecord, task_trust: str | None, receiver: str | None) -> Trust:
        """The trust a send carries: the lower of the session's and of the task it was sent from
        (``task_trust``, told by the capsule host; it can only lower), and ``untrusted`` from a
        session of a uid outside ``launch_uids`` to any receiver that is not a session of its own
        uid (docs/security.md, "Sealed origin and trust")."""
        if sender.trust != "trusted" or (task_trust is not None and task_trust.strip().lower() != "trusted"):
            return Trust.UNTRUSTED
        if not self._may_launch(sender.uid):
            rec = self._table.running_session(receiver) if receiver is not None else None
            if rec is None or rec.uid != sender.uid:
                return Trust.UNTRUSTED
        return Trust.TRUSTED

    def _stamp(
        self, headers: dict[str, str], sender: SessionRecord, url: str, tp: str, subject: str, task_trust: str | None
    ) -> Trust:
        """Stamp origin and trust on ``headers``, sealed when the receiver is a session of ours."""
        receiver = self._receiver(url)
        trust = self._trust(sender, task_trust, receiver)
        headers.update(outbound_headers(Origin.PEER, trust))
        if receiver is not None:
            headers[seal.SEAL_HEADER] = seal.seal(
                self._door_keys.door_key_for(receiver),
                sender=sender.session_id,
                receiver=receiver,
                origin=_PEER,
                trust=trust.value,
                traceparent=tp,
                subject=subject,
            )
        return trust

    async def _endpoint(self, rec: SessionRecord, peer_url: str, headers: dict[str, str]) -> Endpoint:
        """The interface the peer's card selects; Refused when the egress rule does not allow its
        URL. The operator's credential for the peer, when its card selects one, joins ``headers``."""
        try:
            endpoint = await self._a2a.resolve(peer_url)
        except UnsupportedPeerURL as exc:
            raise BadGateway(str(exc)) from None
        refusal = egress_refusal(rec.envelope.network_allow, self.own, endpoint.url)
        if refusal is not None:
            raise Refused(refusal)
        auth = self._peer_auth
        if auth is not None and endpoint.schemes:
            headers.update(await auth.headers(endpoint.url, endpoint.schemes))
        return endpoint

    async def start(self) -> None:
        """Nothing to start: the relay uses the daemon's shared A2A client."""

    async def stop(self) -> None:
        """Nothing to stop: the shared client is closed by the daemon."""

    def _authorize(self, credential: str | None, peer_url: str) -> SessionRecord:
        rec = self._sessions.authenticate(credential)
        refusal = egress_refusal(rec.envelope.network_allow, self.own, peer_url)
        if refusal is not None:
            raise Refused(refusal)
        return rec

    def _outgoing(self, credential: str | None, req: SendRequest, method: str, task_trust: str | None) -> _Outgoing:
        """Authorize, stamp and build the message of a send (counted refused when not authorized);
        the trust is the session's until :meth:`_dial` knows the receiver."""
        try:
            rec = self._authorize(credential, req.peer_url)
        except (BadRequest, Refused):
            self._count(method, "refused")
            raise
        trust = _TRUST[rec.trust]
        session_tp = None if req.traceparent else self._events.session_trace(rec.session_id)
        sent, span_tp, headers = stamp_in(trust, req.traceparent, req.tracestate, session_tp)
        sent_tp = sent.format()
        message = build(
            Message,
            {
                "message_id": req.message_id,
                "role": "user",
                "parts": list(req.parts),
                "context_id": req.context_id,
                "task_id": req.task_id,
                "metadata": None,
            },
        )
        span = self._events.start(
            "roost.relay.send", trace=span_tp, span_id=sent.parent_id, **_attrs(rec.session_id, method, req.peer_url)
        )
        return _Outgoing(rec, trust, sent_tp, headers, message, span, task_trust)

    async def _dial(self, out: _Outgoing, req: SendRequest) -> tuple[Endpoint, _Outgoing]:
        """The checked endpoint of a send, and the send with its origin and trust stamped (sealed
        when the receiver is a session of ours): the lower of the session's and its task's."""
        endpoint = await self._endpoint(out.rec, req.peer_url, out.headers)
        subject = seal.send_subject(out.message)
        trust = self._stamp(out.headers, out.rec, endpoint.url, out.sent_tp, subject, out.task_trust)
        return endpoint, out._replace(trust=trust)

    def _failed(self, span: Span, session_id: str, method: str, exc: Refused | BadGateway | A2AError) -> RoostError:
        """Record a relay call that failed; the exception to raise (403 or 502 with its sentence)."""
        if isinstance(exc, Refused):
            span.failed(ObservedError("Refused", "validation"))
            self._count(method, "refused")
            return exc
        if isinstance(exc, BadGateway):  # the configured peer credential could not be had
            sentence, observed = str(exc), ObservedError("PeerAuthError", "provider")
        else:
            sentence, observed = _failure(exc)
        span.failed(observed)
        self._count(method, "failed")
        log.info("relay_failed", session_id=session_id, method=method, error=observed.name)
        return BadGateway(sentence)

    async def _sent(self, out: _Outgoing, req: SendRequest, task: Task, method: str) -> dict[str, Any]:
        """The peer's Task arrived: the ``a2a_send`` record, the span, the count; the relay's answer."""
        state = str(task.status.state)  # a StrEnum's str() is its value, without the enum property's cost
        trust_value = str(out.trust)
        await self._traces.write(
            out.rec,
            "a2a_send",
            {
                "peer_url": req.peer_url,
                "message_id": req.message_id,
                "task_id": task.id,
                "context_id": task.context_id,
                "traceparent": out.sent_tp,
                "trust": trust_value,
            },
        )
        done: dict[str, Any] = {"roost.relay.task_id": task.id, "roost.relay.state": state}
        out.span.completed(**done)
        self._count(method, "ok")
        return {
            "task_id": task.id,
            "context_id": task.context_id,
            "message_id": req.message_id,
            "traceparent": out.sent_tp,
            "trust": trust_value,
            "state": state,
        }

    async def send(self, credential: str | None, req: SendRequest, task_trust: str | None = None) -> dict[str, Any]:
        out = self._outgoing(credential, req, "send", task_trust)
        try:
            endpoint, out = await self._dial(out, req)
            task = await self._a2a.send_message(
                endpoint.url, out.message, dialect=endpoint.dialect, headers=out.headers
            )
        except (Refused, BadGateway, A2AError) as exc:
            raise self._failed(out.span, out.rec.session_id, "send", exc) from None
        return await self._sent(out, req, task, "send")

    async def send_stream(
        self, credential: str | None, req: SendRequest, task_trust: str | None = None
    ) -> AsyncGenerator[list[dict[str, Any]], None]:
        """A send whose peer streams (``SendStreamingMessage``): the relay's answer when the peer's
        Task arrives (the ``a2a_send`` record is written then, once), then each update as
        :func:`stream_item` shows it, in lists of the items that arrived together (never empty),
        so the caller can pass each list on at once. Refusals and failures before the Task raise
        as :meth:`send`'s do; a failure after it is the last item (``kind: "error"``). Its trust is
        stamped as a plain send's (the lower of the session's and its task's)."""
        out = self._outgoing(credential, req, "stream", task_trust)
        try:
            endpoint, out = await self._dial(out, req)
            batches = self._a2a.stream_message_batches(
                endpoint.url, out.message, dialect=endpoint.dialect, headers=out.headers
            )
            first, *rest = await anext(batches)
        except StopAsyncIteration:
            raise self._failed(out.span, out.rec.session_id, "stream", NoResult(req.peer_url)) from None
        except (Refused, BadGateway, A2AError) as exc:
            raise self._failed(out.span, out.rec.session_id, "stream", exc) from None
        try:
            if not isinstance(first, Task):
                raise InvalidResponse(req.peer_url, "the stream did not begin with the task")
            sent = {"kind": "task", **await self._sent(out, req, first, "stream")}
            yield [sent, *map(stream_item, rest)]
            async for batch in batches:
                yield [stream_item(item) for item in batch]
        except A2AError as exc:
            yield [{"kind": "error", "error": _failure(exc)[0]}]
        finally:
            await batches.aclose()

    async def get(self, credential: str | None, req: A2ATaskRequest, task_trust: str | None = None) -> dict[str, Any]:
        return await self._task_call("get", credential, req, task_trust)

    async def cancel(
        self, credential: str | None, req: A2ATaskRequest, task_trust: str | None = None
    ) -> dict[str, Any]:
        return await self._task_call("cancel", credential, req, task_trust)

    async def _task_call(
        self, method: str, credential: str | None, req: A2ATaskRequest, task_trust: str | None
    ) -> dict[str, Any]:
        count = self._count
        peer_url, task_id = req.peer_url, req.task_id
        try:
            rec = self._authorize(credential, peer_url)
        except (BadRequest, Refused):
            count(method, "refused")
            raise
        sent, span_tp, headers = stamp_in(_TRUST[rec.trust], None, None, self._events.session_trace(rec.session_id))
        tp = sent.format()
        span = self._events.start(
            "roost.relay.send", trace=span_tp, span_id=sent.parent_id, **_attrs(rec.session_id, method, peer_url)
        )
        client = self._a2a
        try:
            ep = await self._endpoint(rec, peer_url, headers)
            self._stamp(headers, rec, ep.url, tp, task_id, task_trust)
            if method == "get":
                task = await client.get_task(ep.url, task_id, dialect=ep.dialect, headers=headers)
            else:
                task = await client.cancel_task(ep.url, task_id, dialect=ep.dialect, headers=headers)
        except (Refused, BadGateway, A2AError) as exc:
            raise self._failed(span, rec.session_id, method, exc) from None
        done: dict[str, Any] = {"roost.relay.task_id": task.id, "roost.relay.state": task.status.state.value}
        span.completed(**done)
        count(method, "ok")
        return task_answer(task)


@functools.lru_cache(maxsize=4096)
def _origin(url: str) -> str:
    """``http://host:port`` of a URL (or of ``host:port``), the key a door is known by."""
    parsed = URL(url if "://" in url else "http://" + url)
    return f"{parsed.scheme}://{parsed.host}:{parsed.port}"


class _Outgoing(NamedTuple):
    """One send on its way: the sender, its trust, the stamp, the message, its span."""

    rec: SessionRecord
    trust: Trust
    sent_tp: str
    headers: dict[str, str]
    message: Message
    span: Span
    task_trust: str | None
