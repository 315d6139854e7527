"""A runtime's own OTel spans (manifest ``observability.otel_endpoint``): one ``capsule.session``
span per task, and the door's span for each A2A task, as OTLP/HTTP JSON.

The seeds' contract for a runtime: a ``capsule.session`` span covers one task, under its own
trace id, with the resource attributes ``service.name`` (the capsule name) and ``service.version``
(the manifest version) and the attribute ``exit_status``; it is posted to
``<otel_endpoint>/v1/traces`` when its task ends, and a failure is logged to
``<workdir>/logs/otel.log``, never fatal. So that both views connect without breaking that rule,
the span carries an OpenTelemetry *link* to the daemon's span of this job (``TRACEPARENT`` from
the launcher). A task that came through the door also gets the door's own span (``a2a.task``, kind
server) in the caller's trace, a child of the caller's ``traceparent``: the daemon cannot see a
door, so the capsule host reports it. No SDK is needed: the document is a few lines of JSON.
docs/operations.md, "OpenTelemetry traces".
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from a2a.door import DoorTask
from a2a.protocol import traceparent
from a2a.protocol.traceparent import TraceParent
from roost import __version__

__all__ = ["POST_TIMEOUT_SECS", "SessionSpans", "otlp_document", "session_spans"]

POST_TIMEOUT_SECS = 5.0
_INTERNAL, _SERVER = 1, 2  # OTLP SpanKind
_OK, _ERROR = 1, 2  # OTLP StatusCode


def _attr(key: str, value: str | int) -> dict[str, object]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(
    name: str,
    trace_id: str,
    span_id: str,
    parent: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attrs: dict[str, str | int],
    ok: bool,
    links: list[TraceParent],
) -> dict[str, object]:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
        "links": [{"traceId": link.trace_id, "spanId": link.parent_id} for link in links],
        "status": {"code": _OK if ok else _ERROR},
    }


def otlp_document(service: str, version: str, spans: list[dict[str, object]]) -> dict[str, object]:
    """An OTLP/HTTP JSON ``ExportTraceServiceRequest`` of ``spans`` from one capsule."""
    resource = [_attr("service.name", service), _attr("service.version", version)]
    scope = {"name": "roost-capsule", "version": __version__}
    return {"resourceSpans": [{"resource": {"attributes": resource}, "scopeSpans": [{"scope": scope, "spans": spans}]}]}


class SessionSpans:
    """The spans of one session's tasks, posted as each task ends."""

    def __init__(
        self, endpoint: str, *, name: str, version: str, session_id: str, job_span: str | None, logs: Path
    ) -> None:
        self.url = endpoint.rstrip("/") + "/v1/traces"
        self.name, self.version, self.session_id = name, version, session_id
        self.job_span = traceparent.parse(job_span)
        self.logs = logs
        self._started: dict[str, int] = {}

    def started(self, task: DoorTask) -> None:
        self._started.setdefault(task.id, time.time_ns())

    def spans_of(self, task: DoorTask, exit_status: str, end_ns: int) -> list[dict[str, object]]:
        start = self._started.pop(task.id, end_ns)
        ok = exit_status == "ok"
        links = [self.job_span] if self.job_span is not None else []
        session: dict[str, str | int] = {
            "exit_status": exit_status,
            "murmur.session_id": self.session_id,
            "murmur.task_id": task.id,
            "murmur.capsule": f"{self.name}@{self.version}",
        }
        own = traceparent.new()  # the task's own trace (the seeds' rule)
        out = [_span("capsule.session", own.trace_id, own.parent_id, "", _INTERNAL, start, end_ns, session, ok, links)]
        if task.dialect is not None:
            caller = traceparent.parse(task.traceparent_from_caller)
            door: dict[str, str | int] = {
                "rpc.system": "jsonrpc",
                "rpc.method": "message/send",
                "http.request.method": "POST",
                "murmur.session_id": self.session_id,
                "murmur.task_id": task.id,
                "murmur.capsule": f"{self.name}@{self.version}",
                "murmur.outcome": exit_status,
            }
            parent = caller.parent_id if caller is not None else ""
            trace = task.trace
            out.append(
                _span("a2a.task", trace.trace_id, trace.parent_id, parent, _SERVER, start, end_ns, door, ok, links)
            )
        return out

    async def finished(self, task: DoorTask, exit_status: str) -> None:
        """Post the task's spans (in a thread, bounded); a failure is a line in ``logs/otel.log``."""
        body = json.dumps(otlp_document(self.name, self.version, self.spans_of(task, exit_status, time.time_ns())))
        await asyncio.to_thread(self._post, body.encode())

    def _post(self, body: bytes) -> None:
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"}, method="POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=POST_TIMEOUT_SECS) as resp:
                resp.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "code", None) or type(exc).__name__
            self._log(f"could not post spans to {self.url}: {reason}")

    def _log(self, line: str) -> None:
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            with open(self.logs / "otel.log", "a", encoding="utf-8") as fh:
                fh.write(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + line + "\n")
        except OSError:
            pass


def session_spans(
    endpoint: str | None, *, name: str, version: str, session_id: str, workdir: Path
) -> SessionSpans | None:
    """The session's span poster when the manifest names an endpoint (None: no spans)."""
    if endpoint is None:
        return None
    return SessionSpans(
        endpoint,
        name=name,
        version=version,
        session_id=session_id,
        job_span=os.environ.get("TRACEPARENT"),
        logs=workdir / "logs",
    )
