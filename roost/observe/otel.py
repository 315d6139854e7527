"""The OpenTelemetry exporter: observation events in, OTLP/HTTP spans out, off the request path.

Why from events and not from spans built where the work happens: one SDK span costs 25–46 µs to
build against ~100 µs for a whole ``/spawn``, so nothing is built on the request path. The event
bus (:mod:`roost.observe.events`) hands this exporter each finished span's record — a tuple it
already made — and :meth:`OtelExporter.offer` only appends it to a bounded queue (a full queue
drops the record, counts it in ``roost_otel_spans_dropped_total`` and logs at most once every
:data:`DROP_LOG_SECS`). A thread of its own takes batches off the queue, applies the sampler
(``OTEL_TRACES_SAMPLER``), turns each record into an SDK ``ReadableSpan`` with the attributes of
:func:`roost.observe.otelmap.shape`, and posts them with the SDK's OTLP/HTTP exporter.

Sampling is decided per trace id (the sampler's root decision), so a delegation tree is exported
whole or not at all; a caller's ``traceparent`` marked not sampled is honoured (its spans are not
exported). Needs the ``otel`` extra (``pip install 'mur-roost[otel]'``); docs/operations.md,
"OpenTelemetry traces".
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

import structlog
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from roost import __version__
from roost.observe.events import Record
from roost.observe.otelmap import OtelSettings, shape

__all__ = ["DROP_LOG_SECS", "OtelExporter", "make_sampler"]

log = structlog.get_logger("roost.otel")

DROP_LOG_SECS = 10.0
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
_FAILED = "operation.failed"
_YIELD_EVERY = 16
_POST_CHUNK = 64
"""Spans the worker builds before it offers the GIL back (building one takes ~17 µs, encoding
~27 µs: a batch of 512 done in one go would hold it for ~20 ms, which the loop would feel)."""


def make_sampler(name: str, arg: float) -> Sampler:
    """The SDK sampler ``OTEL_TRACES_SAMPLER`` names (one of :data:`roost.observe.otelmap.SAMPLERS`)."""
    base = name.removeprefix("parentbased_")
    root: Sampler = ALWAYS_ON if base == "always_on" else ALWAYS_OFF if base == "always_off" else TraceIdRatioBased(arg)
    return ParentBased(root) if name.startswith("parentbased_") else root


class OtelExporter:
    """Owns the queue, the worker thread and the SDK exporter. ``offer`` is the bus's sink."""

    def __init__(
        self,
        settings: OtelSettings,
        *,
        on_drop: Callable[[int], None],
        exporter: SpanExporter | None = None,
        root_span: str = "",
    ) -> None:
        self.settings = settings
        self._queue: deque[Record] = deque()
        self._max = settings.max_queue_size
        self._batch = settings.max_export_batch_size
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._on_drop = on_drop
        self._dropped_unlogged = 0
        self._last_drop_log = 0.0
        self._root_span = root_span
        self._sampler = make_sampler(settings.sampler, settings.sampler_arg)
        self._exporter = exporter or OTLPSpanExporter(
            endpoint=settings.endpoint, headers=settings.headers or None, timeout=settings.timeout_secs
        )
        attrs: dict[str, str] = {**settings.resource_attributes, "service.name": settings.service_name}
        attrs.setdefault("service.version", __version__)
        self._resource = Resource.create(attrs)
        self._scope = InstrumentationScope("mur-roost", __version__)
        self._random = random.Random()
        self.exported = 0
        self.failed_exports = 0

    # -- on the event loop ---------------------------------------------------------------------
    def offer(self, record: Record) -> None:
        """Queue a finished span's record; drop it (counted, logged at a bounded rate) when full."""
        queue = self._queue
        if len(queue) >= self._max:
            self._drop()
            return
        queue.append(record)
        if len(queue) == self._batch:
            self._wake.set()

    def _drop(self) -> None:
        self._on_drop(1)
        self._dropped_unlogged += 1
        now = time.monotonic()
        if now - self._last_drop_log >= DROP_LOG_SECS:
            log.warning(
                "otel_spans_dropped",
                dropped=self._dropped_unlogged,
                queue_size=self._max,
                hint="the OTLP endpoint is slower than the daemon's work; raise OTEL_BSP_MAX_QUEUE_SIZE",
            )
            self._dropped_unlogged = 0
            self._last_drop_log = now

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="roost-otel-export", daemon=True)
        self._thread.start()
        log.info(
            "otel_export_on",
            endpoint=self.settings.endpoint,
            sampler=self.settings.sampler,
            service_name=self.settings.service_name,
        )

    def stop(self, timeout: float = 5.0) -> None:
        """Export what is queued (bounded by ``timeout``), then stop the thread (blocking)."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with contextlib.suppress(Exception):
            self._exporter.shutdown()

    # -- in the worker thread ------------------------------------------------------------------
    def _run(self) -> None:
        delay = self.settings.schedule_delay_secs
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            self.flush()
            if self._stopping:
                return

    def flush(self) -> None:
        """Export everything queued now, in batches (the worker's step; blocking)."""
        while self._queue:
            batch: list[Record] = []
            with contextlib.suppress(IndexError):
                while len(batch) < self._batch:
                    batch.append(self._queue.popleft())
            spans: list[ReadableSpan] = []
            for i, record in enumerate(batch, 1):
                span = self._span(record)
                if span is not None:
                    spans.append(span)
                if i % _YIELD_EVERY == 0:
                    time.sleep(0)  # let the event loop's thread have the GIL between short runs
            # Posted in chunks: encoding one holds the GIL for well under the interpreter's 5 ms
            # switch interval, so the loop is never kept waiting for a whole batch's encoding.
            for start in range(0, len(spans), _POST_CHUNK):
                self._export(spans[start : start + _POST_CHUNK])
                time.sleep(0)

    def _export(self, spans: Sequence[ReadableSpan]) -> None:
        try:
            result = self._exporter.export(spans)
        except Exception as exc:
            result = SpanExportResult.FAILURE
            log.warning("otel_export_failed", spans=len(spans), error=type(exc).__name__)
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        else:
            self.failed_exports += 1

    def _span(self, record: Record) -> ReadableSpan | None:
        kind, _seq, timestamp_ms, span, extra, attributes = record
        if span.trace_flags == "00":
            return None  # the caller's trace is not sampled
        trace_id = int(span.trace_id, 16) if span.trace_id is not None else self._random.getrandbits(128) or 1
        # The root decision needs only the trace id: made before the span's shape is worked out.
        if self._sampler.should_sample(None, trace_id, span.operation).decision is not Decision.RECORD_AND_SAMPLE:
            return None
        failed = kind == _FAILED
        form = shape(span.operation, attributes, failed=failed)
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(trace_id, int(span.span_id, 16), is_remote=False, trace_flags=flags)
        parent = None
        if span.trace_id is not None and span.parent_span_id not in (self._root_span, None):
            parent = SpanContext(trace_id, int(span.parent_span_id, 16), is_remote=True, trace_flags=flags)
        duration = extra.get("durationMs")
        end_ns = timestamp_ms * 1_000_000
        start_ns = end_ns - int(float(duration) * 1_000_000) if isinstance(duration, (int, float)) else end_ns
        status = Status(StatusCode.UNSET)
        error = extra.get("error")
        if failed:
            message = error.get("message") if isinstance(error, dict) else None
            name = error.get("name") if isinstance(error, dict) else None
            status = Status(StatusCode.ERROR, str(message or name or "failed"))
            if name is not None:
                form.attributes["error.type"] = str(name)
        return ReadableSpan(
            name=form.name,
            context=context,
            parent=parent,
            resource=self._resource,
            attributes=form.attributes,
            kind=_KINDS[form.kind],
            status=status,
            start_time=start_ns,
            end_time=end_ns,
            instrumentation_scope=self._scope,
        )
