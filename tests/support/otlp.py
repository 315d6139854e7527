"""A test double of the OTLP/HTTP traces interface: ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest``, answered 200, each span kept as a plain :class:`Got` value.

It runs on a loopback port in a thread of its own (stdlib ``http.server``), so a daemon started
as a child process, a capsule host, or the test's own event loop can all export to it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["Got", "OtlpReceiver", "otlp_receiver"]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind is not None else None


@dataclass
class Got:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    start_ns: int
    end_ns: int
    links: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[Got] = []
        self.posts = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                if headers.get("content-type", "").startswith("application/json"):
                    receiver._keep_json(json.loads(body), headers)
                else:
                    req = ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    receiver._keep(req, headers)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _keep(self, req: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        got: list[Got] = []
        for rs in req.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        Got(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            resource=resource,
                            status_code=s.status.code,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                            headers=headers,
                        )
                    )
        with self._lock:
            self.spans.extend(got)
            self.posts += 1

    def _keep_json(self, doc: dict[str, Any], headers: dict[str, str]) -> None:
        """OTLP/HTTP JSON: ids are hex strings, 64-bit integers are strings."""

        def value(v: dict[str, Any]) -> Any:
            if "intValue" in v:
                return int(v["intValue"])
            return next(iter(v.values()), None)

        got: list[Got] = []
        for rs in doc["resourceSpans"]:
            resource = {a["key"]: value(a["value"]) for a in rs["resource"]["attributes"]}
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    got.append(
                        Got(
                            name=s["name"],
                            trace_id=s["traceId"],
                            span_id=s["spanId"],
                            parent_span_id=s.get("parentSpanId", ""),
                            kind=int(s["kind"]),  # the protobuf enum number, as in the binary form
                            attributes={a["key"]: value(a["value"]) for a in s.get("attributes", [])},
                            resource=resource,
                            status_code=int(s.get("status", {}).get("code", 0)),
                            start_ns=int(s["startTimeUnixNano"]),
                            end_ns=int(s["endTimeUnixNano"]),
                            links=[(link["traceId"], link["spanId"]) for link in s.get("links", [])],
                            headers=headers,
                        )
                    )
        with self._lock:
            self.spans.extend(got)
            self.posts += 1

    def wait_for(self, predicate: Callable[[list[Got]], bool], timeout: float = 30.0) -> list[Got]:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s.name for s in spans})
                raise AssertionError(f"the receiver did not get the spans waited for; it has {len(spans)}: {names}")
            time.sleep(0.05)


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
