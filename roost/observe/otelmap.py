"""How an observation event becomes an OpenTelemetry span: its name, kind and attributes (pure).

Kept apart from the exporter (:mod:`roost.observe.otel`) so the mapping is unit-tested without
the SDK, and so the settings parsing here runs in a daemon without the ``otel`` extra.

Attributes follow the OpenTelemetry semantic conventions where they exist — GenAI agent spans
(``gen_ai.operation.name = invoke_agent``, ``gen_ai.agent.name``/``id``) for a delegation and a
top-level job, HTTP client and JSON-RPC attributes for a relayed send — plus ``murmur.*`` for
what only Murmur names: the job id, session id, capsule ``name@version`` and outcome. Every
``roost.*`` attribute of the event is kept as it is (scalars, never content, never a token).
docs/operations.md, "OpenTelemetry traces", lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote, urlsplit

__all__ = ["SAMPLERS", "OtelSettings", "SpanShape", "otel_settings", "parse_headers", "shape"]

Kind = Literal["internal", "client", "server"]
Scalar = str | int | float | bool | None

SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


@dataclass(frozen=True, slots=True)
class SpanShape:
    name: str
    kind: Kind
    attributes: dict[str, str | int | float | bool]


def _capsule(attrs: Mapping[str, Scalar], prefix: str) -> str | None:
    name, version = attrs.get(f"{prefix}.name"), attrs.get(f"{prefix}.version")
    if isinstance(name, str) and isinstance(version, str):
        return f"{name}@{version}"
    capsule = attrs.get(f"{prefix}.capsule")
    return capsule if isinstance(capsule, str) else None


def _url_parts(url: object) -> dict[str, str | int]:
    if not isinstance(url, str):
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return {}
    out: dict[str, str | int] = {"url.full": url}
    if parts.hostname:
        out["server.address"] = parts.hostname
    if port is not None:
        out["server.port"] = port
    return out


def shape(operation: str, attrs: Mapping[str, Scalar], *, failed: bool) -> SpanShape:
    """The span an event of ``operation`` with ``attrs`` (its merged attributes) becomes."""
    out: dict[str, str | int | float | bool] = {k: v for k, v in attrs.items() if v is not None}
    out["roost.operation"] = operation
    name = operation
    kind: Kind = "internal"
    subsystem = operation.split(".")[1] if operation.count(".") >= 2 else operation

    def murmur(key: str, source: str) -> None:
        value = attrs.get(source)
        if value is not None:
            out[key] = value

    if subsystem in ("job", "delegation"):
        capsule = _capsule(attrs, f"roost.{subsystem}")
        murmur("murmur.job_id", f"roost.{subsystem}.job_id")
        murmur("murmur.session_id", f"roost.{subsystem}.session_id")
        murmur("murmur.parent_session_id", f"roost.{subsystem}.parent_session_id")
        murmur("murmur.delegation_id", f"roost.{subsystem}.delegation_id")
        murmur("murmur.outcome", f"roost.{subsystem}.outcome")
        if capsule is not None:
            out["murmur.capsule"] = capsule
        # A delegation is one agent invoking another (GenAI agent spans); a top-level job is the
        # operator's invocation. The job span under a delegation keeps its own name.
        invoke = subsystem == "delegation" or not attrs.get("roost.job.parent_session_id")
        if invoke:
            agent = attrs.get(f"roost.{subsystem}.name")
            out["gen_ai.operation.name"] = "invoke_agent"
            out["gen_ai.provider.name"] = "murmur"
            if isinstance(agent, str):
                out["gen_ai.agent.name"] = agent
                name = f"invoke_agent {agent}"
            agent_id = attrs.get(f"roost.{subsystem}.session_id") or attrs.get(f"roost.{subsystem}.job_id")
            if agent_id is not None:
                out["gen_ai.agent.id"] = agent_id
            kind = "client" if subsystem == "delegation" else kind
    elif subsystem == "referee":
        murmur("murmur.session_id", "roost.referee.session_id")
        murmur("murmur.capsule", "roost.referee.capsule")
        murmur("murmur.outcome", "roost.referee.decision")
    elif subsystem == "relay":
        kind = "client"
        method = attrs.get("roost.relay.method")
        murmur("murmur.session_id", "roost.relay.session_id")
        murmur("murmur.outcome", "roost.relay.state")
        out["http.request.method"] = "POST"
        out["rpc.system"] = "jsonrpc"
        out["network.protocol.name"] = "http"
        if isinstance(method, str):
            out["rpc.method"] = method
        out.update(_url_parts(attrs.get("roost.relay.peer_url")))
        status = attrs.get("roost.relay.http_status")
        if isinstance(status, int):
            out["http.response.status_code"] = status
    elif subsystem == "peer":
        murmur("murmur.session_id", "roost.session_id")
        murmur("murmur.outcome", "roost.peer.outcome")
    elif subsystem == "door":
        kind = "server"
        out["rpc.system"] = "jsonrpc"
        out["http.request.method"] = "POST"
        murmur("rpc.method", "roost.door.method")
        murmur("murmur.session_id", "roost.door.session_id")
        murmur("murmur.capsule", "roost.door.capsule")
        murmur("murmur.outcome", "roost.door.state")
    elif subsystem in ("process", "session", "completion"):
        murmur("murmur.job_id", f"roost.{subsystem}.job_id")
        murmur("murmur.session_id", f"roost.{subsystem}.session_id")
        murmur("murmur.capsule", f"roost.{subsystem}.capsule")
        murmur("murmur.outcome", f"roost.{subsystem}.outcome")
    if failed and "murmur.outcome" not in out:
        out["murmur.outcome"] = "failed"
    return SpanShape(name, kind, out)


# -- settings ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OtelSettings:
    """What the exporter is told, from the standard ``OTEL_*`` variables over roost.toml's keys."""

    endpoint: str
    """The OTLP/HTTP traces URL (``…/v1/traces``)."""
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    timeout_secs: float = 10.0
    service_name: str = "mur-roost"
    resource_attributes: dict[str, str] = field(default_factory=dict)
    sampler: str = "parentbased_always_on"
    sampler_arg: float = 1.0
    max_queue_size: int = 2048
    max_export_batch_size: int = 512
    schedule_delay_secs: float = 5.0


def parse_headers(text: str) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS``: ``key=value`` pairs, comma-separated, values URL-encoded."""
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[unquote(key.strip())] = unquote(value.strip())
    return out


def _number(name: str, raw: str, *, low: float, high: float) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {raw!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low:g} and {high:g}, not {raw!r}")
    return value


def otel_settings(env: Mapping[str, str], file: Mapping[str, object]) -> OtelSettings | None:
    """The exporter's settings, or None when tracing is off (no endpoint, ``OTEL_SDK_DISABLED``,
    or ``OTEL_TRACES_EXPORTER=none``). ``file`` holds roost.toml's ``otel_*`` keys (lower-case
    names of the same variables); a variable set in the environment wins. ValueError: a value
    that cannot be used, in one sentence naming it.
    """

    def get(name: str) -> str | None:
        value = env.get(name)
        if value is None or value == "":
            raw = file.get(name.lower())
            value = None if raw is None else str(raw).lower() if isinstance(raw, bool) else str(raw)
        return value or None

    if (get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return None
    exporter = (get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    if exporter == "none":
        return None
    if exporter != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER must be otlp or none, not {exporter!r}")
    protocol = (
        get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    ).strip()
    traces = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if traces is None and base is None:
        return None
    if protocol != "http/protobuf":
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf (the exporter roost ships), not {protocol!r}"
        )
    endpoint = traces if traces is not None else base.rstrip("/") + "/v1/traces"  # type: ignore[union-attr]
    scheme = urlsplit(endpoint).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"the OTLP traces endpoint must be an http:// or https:// URL, not {endpoint!r}")
    headers = parse_headers(get("OTEL_EXPORTER_OTLP_HEADERS") or "")
    headers.update(parse_headers(get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or ""))
    timeout_ms = get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or get("OTEL_EXPORTER_OTLP_TIMEOUT") or "10000"
    sampler = (get("OTEL_TRACES_SAMPLER") or "parentbased_always_on").strip().lower()
    if sampler not in SAMPLERS:
        raise ValueError(f"OTEL_TRACES_SAMPLER must be one of {', '.join(SAMPLERS)}, not {sampler!r}")
    arg_raw = get("OTEL_TRACES_SAMPLER_ARG")
    arg = _number("OTEL_TRACES_SAMPLER_ARG", arg_raw, low=0.0, high=1.0) if arg_raw is not None else 1.0
    resource = parse_headers(get("OTEL_RESOURCE_ATTRIBUTES") or "")
    service = get("OTEL_SERVICE_NAME") or resource.pop("service.name", None) or "mur-roost"
    resource.pop("service.name", None)
    queue = int(_number("OTEL_BSP_MAX_QUEUE_SIZE", get("OTEL_BSP_MAX_QUEUE_SIZE") or "2048", low=1, high=1e7))
    batch = int(
        _number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") or "512", low=1, high=1e6)
    )
    delay = _number("OTEL_BSP_SCHEDULE_DELAY", get("OTEL_BSP_SCHEDULE_DELAY") or "5000", low=0, high=3.6e6)
    return OtelSettings(
        endpoint=endpoint,
        headers=headers,
        timeout_secs=_number("OTEL_EXPORTER_OTLP_TIMEOUT", timeout_ms, low=1, high=3.6e6) / 1000,
        service_name=service,
        resource_attributes=resource,
        sampler=sampler,
        sampler_arg=arg,
        max_queue_size=queue,
        max_export_batch_size=min(batch, queue),
        schedule_delay_secs=delay / 1000,
    )
