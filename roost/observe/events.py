"""Daemon observation events in the versioned ``ObserveEvent`` shape.

Every unit of daemon work (a child started, a completion delivered, a handle redeemed, a relay
sent, a reconcile pass) is reported as ``operation.started`` followed by ``operation.completed``
or ``operation.failed``; the operation is the span name (``roost.process.start`` …). Attributes
are scalars under ``roost.<subsystem>.*`` keys and never content (no task text, no file bytes,
no token — only ids).

``runId`` names the daemon instance (kept in the state database, so it survives restarts);
``executionId`` names this process; ``sequence`` is 0-based and monotonic per execution.
Subscribers (``roostctl events -f``) each get a bounded queue; a slow reader loses the oldest
events and is told how many with an ``events.lagged`` marker instead of stalling the daemon.

Trace context: a span started with a caller's W3C ``traceparent`` (``trace=``) carries that
trace's id (``traceId``) and the caller's span as its ``parentSpanId``; a child started with
``parent=`` inherits its parent's trace. A :attr:`EventBus.sink` (the OpenTelemetry exporter,
:mod:`roost.observe.otel`) is handed each finished span's record as it ends, to be made into an
OpenTelemetry span off the request path; with no sink nothing more is done than before.
:attr:`EventBus.session_trace` names the trace context of a session (its job's span), so a
service can put its work in the delegation tree the session belongs to (docs/operations.md,
"OpenTelemetry traces").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Literal, cast

from a2a.protocol.ids import uuid7_hex
from a2a.protocol.traceparent import TraceParent
from roost.core.admin_models import ObserveEvent

__all__ = ["NO_PARENT", "Category", "EventBus", "ObservedError", "Record", "Scalar", "Span", "Subscription"]

NO_PARENT = "0" * 16
"""The parent id of a ``trace=`` context that starts a new trace: the span is its trace's root."""

Scalar = str | int | float | bool | None
Category = Literal[
    "authentication",
    "authorization",
    "rate-limit",
    "overloaded",
    "timeout",
    "network",
    "provider",
    "validation",
    "tool",
    "checkpoint",
    "aborted",
    "unknown",
]


@dataclass(frozen=True, slots=True)
class ObservedError:
    name: str
    category: Category = "unknown"
    code: str | None = None
    status_code: int | None = None
    retryable: bool | None = None
    message: str | None = None

    def as_dict(self) -> dict[str, str | int | bool]:
        out: dict[str, str | int | bool] = {"name": self.name, "category": self.category}
        if self.code is not None:
            out["code"] = self.code
        if self.status_code is not None:
            out["statusCode"] = self.status_code
        if self.retryable is not None:
            out["retryable"] = self.retryable
        if self.message is not None:
            out["message"] = self.message
        return out


_SCALAR_TYPES = frozenset({str, int, float, bool})


def _scalars(attrs: dict[str, object]) -> dict[str, Scalar]:
    """``attrs`` itself (a fresh ``**kwargs`` dict), once every value is checked to be a scalar."""
    for key, value in attrs.items():
        if value is not None and type(value) not in _SCALAR_TYPES and not isinstance(value, (str, int, float, bool)):
            raise TypeError(f"event attribute {key!r} must be a scalar, not {type(value).__name__}")
    return attrs  # type: ignore[return-value]  # checked above


class Subscription:
    """One reader of the live stream."""

    def __init__(self, bus: EventBus, maxsize: int) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[ObserveEvent] = asyncio.Queue(maxsize)
        self._held: ObserveEvent | None = None
        self.dropped = 0

    def _offer(self, event: ObserveEvent) -> None:
        if self._queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(event)

    async def get(self) -> ObserveEvent:
        """The next event; a lag marker first when events were dropped since the last read."""
        if self._held is not None:
            event, self._held = self._held, None
            return event
        event = await self._queue.get()
        if self.dropped:
            lagged: ObserveEvent = {"type": "events.lagged", "dropped": self.dropped}
            self.dropped = 0
            self._held = event
            return lagged
        return event

    def close(self) -> None:
        self._bus._subscribers.discard(self)


class Span:
    """An operation in flight; finish it exactly once with :meth:`completed` or :meth:`failed`.

    A plain slotted class rather than a dataclass: one is made per unit of daemon work, and a
    generated ``__init__`` with defaults costs more than this one.
    """

    __slots__ = (
        "attributes",
        "bus",
        "done",
        "operation",
        "parent_span_id",
        "span_id",
        "started",
        "subsystem",
        "trace_flags",
        "trace_id",
    )

    def __init__(
        self,
        bus: EventBus,
        subsystem: str,
        operation: str,
        span_id: str,
        parent_span_id: str | None,
        started: float,
        attributes: dict[str, Scalar],
        trace_id: str | None = None,
        trace_flags: str = "01",
    ) -> None:
        self.bus = bus
        self.subsystem = subsystem
        self.operation = operation
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.started = started
        self.attributes = attributes
        self.done = False
        self.trace_id = trace_id
        self.trace_flags = trace_flags

    def within(self, trace: TraceParent | None) -> None:
        """Put a span still in flight under a trace learned after it started (a peer-file redeem
        learns the minter's session from the handle); its end event carries it."""
        if trace is not None and not self.done:
            self.trace_id, self.trace_flags = trace.trace_id, trace.flags
            self.parent_span_id = trace.parent_id if trace.parent_id != NO_PARENT else self.bus.root_span

    def traceparent(self) -> TraceParent | None:
        """This span as a ``traceparent`` for its children (None: it belongs to no trace)."""
        if self.trace_id is None:
            return None
        return TraceParent("00", self.trace_id, self.span_id, self.trace_flags)

    def completed(self, *, result_count: int | None = None, **attributes: object) -> None:
        if self.done:
            return
        self.done = True
        extra: dict[str, object] = {"durationMs": (time.monotonic() - self.started) * 1000}
        if result_count is not None:
            extra["resultCount"] = result_count
        merged = {**self.attributes, **_scalars(attributes)} if attributes else self.attributes
        self.bus._emit("operation.completed", self, merged, extra)

    def failed(self, error: ObservedError, **attributes: object) -> None:
        if self.done:
            return
        self.done = True
        extra: dict[str, object] = {
            "durationMs": (time.monotonic() - self.started) * 1000,
            "error": error.as_dict(),
        }
        merged = {**self.attributes, **_scalars(attributes)} if attributes else self.attributes
        self.bus._emit("operation.failed", self, merged, extra)


_SPAN_IDS = Random()
"""Span ids: 64 random bits each, as OpenTelemetry's SDKs draw them. They name an operation in
the event stream and authorize nothing, so a seeded generator of their own serves (no system
call per span) and nothing else draws from it. Reseeded in a forked child, so the two never
repeat each other's ids."""
os.register_at_fork(after_in_child=_SPAN_IDS.seed)

_NO_EXTRA: dict[str, object] = {}  # shared by every event without extra fields; never mutated


@functools.lru_cache(maxsize=256)
def _subsystem(operation: str) -> str:
    """``process`` of ``roost.process.start``: the span names are a fixed few."""
    return operation.split(".")[1]


Record = tuple[str, int, int, Span, dict[str, object], dict[str, Scalar]]
"""What the ring keeps of an event: kind, sequence, timestamp, span, extra fields, attributes.
The event's dict is built when it is read (:meth:`EventBus.recent`, a subscriber): most events
are never read, and a daemon emits two for every relayed send."""
_Record = Record
_STARTED = "operation.started"


def _no_trace(session_id: str) -> TraceParent | None:
    return None


class EventBus:
    """Builds, numbers, keeps (ring buffer) and fans out observation events."""

    def __init__(
        self,
        run_id: str | None = None,
        *,
        keep: int = 2000,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.run_id = run_id or uuid7_hex()
        self.execution_id = uuid7_hex()
        self.root_span = secrets.token_hex(8)
        self._sequence = 0
        self._recent: deque[_Record] = deque(maxlen=keep)
        self._subscribers: set[Subscription] = set()
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.sink: Callable[[Record], None] | None = None
        """Handed every finished span's record (``operation.completed``/``failed``) when set."""
        self.session_trace: Callable[[str], TraceParent | None] = _no_trace
        """The trace context of a session's work (its job's span); set by the daemon's composition."""

    def start(
        self,
        operation: str,
        *,
        subsystem: str | None = None,
        parent: Span | None = None,
        item_count: int | None = None,
        trace: TraceParent | None = None,
        span_id: str | None = None,
        **attributes: object,
    ) -> Span:
        """Report ``operation.started`` and return the span to finish later.

        ``trace`` puts the span under a caller's context (its trace id; its span as the parent,
        or none when that is :data:`NO_PARENT`); ``span_id`` gives it an id chosen beforehand
        (the one a ``traceparent`` already sent names).
        """
        if trace is not None:
            trace_id: str | None = trace.trace_id
            flags = trace.flags
            parent_id = trace.parent_id if trace.parent_id != NO_PARENT else self.root_span
        elif parent is not None:
            trace_id, flags, parent_id = parent.trace_id, parent.trace_flags, parent.span_id
        else:
            trace_id, flags, parent_id = None, "01", self.root_span
        span = Span(
            self,
            subsystem or _subsystem(operation),
            operation,
            span_id or f"{_SPAN_IDS.getrandbits(64):016x}",
            parent_id,
            time.monotonic(),
            _scalars(attributes),
            trace_id,
            flags,
        )
        extra: dict[str, object] = _NO_EXTRA if item_count is None else {"itemCount": item_count}
        self._emit(_STARTED, span, span.attributes, extra)
        return span

    def _emit(self, kind: str, span: Span, attributes: dict[str, Scalar], extra: dict[str, object]) -> None:
        seq = self._sequence
        self._sequence = seq + 1
        record: _Record = (kind, seq, self._clock(), span, extra, attributes)
        self._recent.append(record)
        if self.sink is not None and kind is not _STARTED:
            self.sink(record)
        if self._subscribers:
            event = self._event(record)
            for sub in list(self._subscribers):
                sub._offer(event)

    def _event(self, record: _Record) -> ObserveEvent:
        """The ``ObserveEvent`` dict of a kept record (a new dict each time: readers may keep it)."""
        kind, seq, timestamp, span, extra, attributes = record
        event: dict[str, object] = {
            "schemaVersion": 1,
            "type": kind,
            "eventId": f"{self.execution_id}:{seq}",
            "sequence": seq,
            "timestamp": timestamp,
            "runId": self.run_id,
            "executionId": self.execution_id,
            "spanId": span.span_id,
            "parentSpanId": span.parent_span_id,
            **({"traceId": span.trace_id} if span.trace_id is not None else _NO_EXTRA),
            "subsystem": span.subsystem,
            "operation": span.operation,
            **extra,
            "attributes": dict(attributes),
        }
        duration = extra.get("durationMs")
        if isinstance(duration, float):
            event["durationMs"] = round(duration, 3)
        return cast(ObserveEvent, event)

    def recent(self, limit: int | None = None) -> list[ObserveEvent]:
        records = list(self._recent)
        return [self._event(r) for r in (records if limit is None else records[-limit:])]

    def subscribe(self, *, maxsize: int = 1000, replay: int = 0) -> Subscription:
        sub = Subscription(self, maxsize)
        for event in self.recent(replay) if replay else []:
            sub._offer(event)
        self._subscribers.add(sub)
        return sub
