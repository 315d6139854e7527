"""The OpenTelemetry exporter's pure parts and its queue: settings, span shapes, sampling, drops."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol.traceparent import TraceParent
from roost.observe.events import NO_PARENT, EventBus, Record
from roost.observe.otelmap import OtelSettings, otel_settings, parse_headers, shape
from roost.state.config import Config

otel = pytest.importorskip("roost.observe.otel")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")


def test_off_unless_an_endpoint_is_set() -> None:
    assert otel_settings({}, {}) is None
    assert otel_settings({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, {}) is None
    assert otel_settings({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, {}) is None


def test_env_wins_over_the_file_and_the_base_endpoint_gets_its_path() -> None:
    s = otel_settings(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318/", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
        {"otel_exporter_otlp_endpoint": "http://file:4318", "otel_traces_sampler": "traceidratio"},
    )
    assert s is not None and s.endpoint == "http://env:4318/v1/traces"
    assert (s.sampler, s.sampler_arg) == ("traceidratio", 0.25)
    t = otel_settings({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t/x"}, {"otel_sdk_disabled": False})
    assert t is not None and t.endpoint == "https://t/x" and t.service_name == "mur-roost"


def test_headers_resource_and_batching() -> None:
    s = otel_settings(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1",
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b,x=1",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=fleet,deployment.environment=prod",
            "OTEL_BSP_MAX_QUEUE_SIZE": "10",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "50",
            "OTEL_BSP_SCHEDULE_DELAY": "250",
        },
        {},
    )
    assert s is not None
    assert s.headers == {"api-key": "a b", "x": "1"} and "a b" not in repr(s)
    assert s.service_name == "fleet" and s.resource_attributes == {"deployment.environment": "prod"}
    assert (s.max_queue_size, s.max_export_batch_size, s.schedule_delay_secs) == (10, 10, 0.25)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER must be one of"),
        ({"OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG must be between 0 and 1"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "must be http/protobuf"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "must be otlp or none"),
    ],
)
def test_a_bad_setting_is_one_sentence(env: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        otel_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1", **env}, {})


@given(st.text(max_size=200))
def test_parse_headers_never_raises(text: str) -> None:
    assert isinstance(parse_headers(text), dict)


def test_config_shows_headers_only_as_set() -> None:
    cfg = Config(state_dir="/tmp/s", registry_path="/tmp/r", otel_exporter_otlp_headers="api-key=secret")
    assert cfg.public()["otel_exporter_otlp_headers"] == "(set)"
    assert cfg.otel_file_settings() == {"otel_exporter_otlp_headers": "api-key=secret"}


def test_shapes_follow_the_semantic_conventions() -> None:
    d = shape(
        "roost.delegation.invoke",
        {"roost.delegation.name": "worker", "roost.delegation.version": "0.1.0", "roost.delegation.job_id": "job_1"},
        failed=False,
    )
    assert d.name == "invoke_agent worker" and d.kind == "client"
    assert d.attributes["gen_ai.operation.name"] == "invoke_agent" and d.attributes["gen_ai.agent.id"] == "job_1"
    assert d.attributes["murmur.capsule"] == "worker@0.1.0" and d.attributes["murmur.job_id"] == "job_1"
    child = shape("roost.job.run", {"roost.job.name": "w", "roost.job.parent_session_id": "ses_p"}, failed=True)
    assert child.name == "roost.job.run" and "gen_ai.operation.name" not in child.attributes
    assert child.attributes["murmur.outcome"] == "failed"
    relay = shape(
        "roost.relay.send",
        {"roost.relay.method": "send", "roost.relay.peer_url": "http://127.0.0.1:9/a2a", "roost.relay.state": "x"},
        failed=False,
    )
    assert relay.kind == "client" and relay.attributes["server.port"] == 9
    assert relay.attributes["rpc.method"] == "send" and relay.attributes["url.full"] == "http://127.0.0.1:9/a2a"


def _exporter(
    bus: EventBus, sampler: str = "parentbased_always_on", arg: float = 1.0, queue: int = 2048
) -> tuple[object, object, list[int]]:
    mem = in_memory.InMemorySpanExporter()
    drops: list[int] = []
    settings = OtelSettings(endpoint="http://unused", sampler=sampler, sampler_arg=arg, max_queue_size=queue)
    exp = otel.OtelExporter(settings, on_drop=drops.append, exporter=mem, root_span=bus.root_span)
    bus.sink = exp.offer
    return exp, mem, drops


def test_a_ratio_sampler_keeps_or_drops_whole_traces() -> None:
    bus = EventBus()
    exp, mem, _ = _exporter(bus, "parentbased_traceidratio", 0.5)
    rand = random.Random(7)
    for _ in range(200):
        root = bus.start("roost.job.run", trace=TraceParent("00", f"{rand.getrandbits(128):032x}", NO_PARENT, "01"))
        for _ in range(3):
            bus.start("roost.process.start", parent=root).completed()
        root.completed()
    exp.flush()  # type: ignore[attr-defined]
    by_trace: dict[int, int] = {}
    for s in mem.get_finished_spans():  # type: ignore[attr-defined]
        by_trace[s.context.trace_id] = by_trace.get(s.context.trace_id, 0) + 1
    assert set(by_trace.values()) == {4}  # every span of a kept trace, none of a dropped one
    assert 40 < len(by_trace) < 160


def test_a_caller_that_is_not_sampled_is_honoured_and_always_off_exports_nothing() -> None:
    bus = EventBus()
    exp, mem, _ = _exporter(bus)
    bus.start("roost.relay.send", trace=TraceParent("00", "1" * 32, "2" * 16, "00")).completed()
    bus.start("roost.relay.send", trace=TraceParent("00", "1" * 32, "2" * 16, "01")).completed()
    exp.flush()  # type: ignore[attr-defined]
    spans = mem.get_finished_spans()  # type: ignore[attr-defined]
    assert len(spans) == 1 and spans[0].parent.span_id == int("2" * 16, 16)
    off = EventBus()
    exp2, mem2, _ = _exporter(off, "always_off")
    off.start("roost.job.run").completed()
    exp2.flush()  # type: ignore[attr-defined]
    assert mem2.get_finished_spans() == ()  # type: ignore[attr-defined]


def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    bus = EventBus()
    exp, mem, drops = _exporter(bus, queue=3)
    for _ in range(10):
        bus.start("roost.peer.mint").completed()
    assert len(drops) == 7 and sum(drops) == 7
    exp.flush()  # type: ignore[attr-defined]
    assert len(mem.get_finished_spans()) == 3  # type: ignore[attr-defined]


def test_events_carry_their_trace_and_a_failed_span_is_an_error() -> None:
    bus = EventBus()
    exp, mem, _ = _exporter(bus)
    span = bus.start("roost.relay.send", trace=TraceParent("00", "a" * 32, "b" * 16, "01"), span_id="c" * 16)
    from roost.observe.events import ObservedError

    span.failed(ObservedError("Refused", "validation", message="not allowed"))
    started, _ = bus.recent()
    assert started["traceId"] == "a" * 32 and started["parentSpanId"] == "b" * 16 and started["spanId"] == "c" * 16
    exp.flush()  # type: ignore[attr-defined]
    (s,) = mem.get_finished_spans()  # type: ignore[attr-defined]
    assert s.status.status_code.name == "ERROR" and s.attributes["error.type"] == "Refused"
    assert s.context.span_id == int("c" * 16, 16)
    plain: list[Record] = []
    quiet = EventBus()
    quiet.sink = plain.append
    quiet.start("roost.process.start").completed()
    assert [r[0] for r in plain] == ["operation.completed"]  # only finished spans reach the sink
    assert "traceId" not in quiet.recent()[0]
