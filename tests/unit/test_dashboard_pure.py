"""The dashboard's pure parts: request checks, gauges from /metrics text, the trace timeline, HTML."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from roost.dashboard import render
from roost.dashboard.gauges import gauges, parse_metrics
from roost.dashboard.guard import Guard
from roost.dashboard.timeline import layout, parse_trace


def test_guard() -> None:
    g = Guard(port=8123)
    assert g.url() == f"http://127.0.0.1:8123/?token={g.token}"
    assert g.token_ok(g.token) and not g.token_ok(None) and not g.token_ok(g.token + "x") and not g.token_ok("")
    assert g.cookie_ok(g.session) and not g.cookie_ok(g.token)  # the URL token is not the cookie
    for host in ("127.0.0.1:8123", "localhost:8123", "LOCALHOST:8123", "[::1]:8123"):
        assert g.host_ok(host), host
    for host in (None, "127.0.0.1", "127.0.0.1:8124", "evil.example:8123", "127.0.0.1.nip.io:8123"):
        assert not g.host_ok(host), host
    assert g.origin_ok("http://127.0.0.1:8123") and not g.origin_ok("http://evil.example") and not g.origin_ok(None)
    assert not g.origin_ok("null")
    assert g.csrf_ok(g.csrf) and not g.csrf_ok(None)
    cookie = g.cookie_header()
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and g.token not in cookie
    assert len({Guard(port=1).token for _ in range(5)}) == 5


METRICS = """# HELP roost_spawn_requests_total Spawn decisions
roost_spawn_requests_total{outcome="granted"} 7.0
roost_spawn_requests_total{outcome="policy"} 2.0
roost_spawn_requests_total{outcome="identity"} 1.0
roost_event_loop_lag_seconds_bucket{le="0.001"} 90.0
roost_event_loop_lag_seconds_bucket{le="0.005"} 100.0
roost_event_loop_lag_seconds_bucket{le="+Inf"} 100.0
roost_event_loop_lag_seconds_count 100.0
roost_event_loop_lag_seconds_sum 0.05
garbage line
"""


def test_gauges() -> None:
    status = {
        "sessions": {"running": 3},
        "max_live_capsules": 16,
        "jobs": {"starting": 1, "running": 2},
        "draining": False,
    }
    g = gauges(status, METRICS)  # type: ignore[arg-type]  # the fields gauges reads
    assert (g.live, g.ceiling, g.starting, g.running_jobs) == (3, 16, 1, 2)
    assert g.refusals == {"policy": 2, "identity": 1}
    assert g.loop_lag_ms is not None and abs(g.loop_lag_ms - 0.5) < 1e-9 and g.loop_lag_p99_ms == 5.0
    html = render.home_fragment([], [], g)
    assert "3 of 16" in html and "identity 1, policy 2" in html and "99% under 5 ms" in html


@given(st.text(max_size=300))
def test_parse_metrics_never_raises(text: str) -> None:
    assert isinstance(parse_metrics(text), list)


def _line(et: str, ts: int, **kw: object) -> str:
    return json.dumps({"event_type": et, "timestamp": ts, **kw})


def test_timeline_lanes_bars_and_points() -> None:
    text = "\n".join(
        [
            _line("session_start", 1000, capsule_name="orchestrator"),
            _line("task_start", 1000, task_id="t1"),
            _line("delegation_start", 1200, delegation_id="d1", capsule="worker", version="0.1.0"),
            _line("a2a_send", 1300, peer_url="http://127.0.0.1:9"),
            _line("peer_handle_mint", 1400, path="note.txt"),
            _line("delegation", 1800, delegation_id="d1", capsule="worker", version="0.1.0", outcome="ok"),
            _line("task_end", 2000, task_id="t1", exit_status="ok"),
            "not json",
            json.dumps({"event_type": "x"}),
        ]
    )
    items, t0, t1 = layout(parse_trace(text))
    assert (t0, t1) == (1000, 2000)
    by = {i.lane: i for i in items}
    assert by["task"].kind == "bar" and by["task"].left == 0.0 and by["task"].width == 100.0
    assert by["delegation"].label == "delegation to worker@0.1.0: ok, 600 ms"
    assert by["delegation"].left == 20.0 and by["delegation"].width == 60.0
    assert by["a2a_send"].kind == "point" and by["a2a_send"].left == 30.0
    assert by["peer"].label == "peer_handle_mint note.txt"
    html = render._timeline(items, t0, t1)
    assert html.count('class="row"') == len(items) and 'data-left="20.0"' in html


def test_html_escapes_what_capsules_say() -> None:
    node = {
        "session_id": "ses_<x>",
        "name": "<script>alert(1)</script>",
        "version": "1",
        "status": "failed",
        "job_state": "terminated",
        "job_id": "job_1",
        "created_ms": 1,
        "ended_ms": 2,
        "reason": "<b>bad</b>",
        "outcome": "terminated",
        "depth": 0,
        "children": [],
    }
    html = render.tree([node], "none")  # type: ignore[list-item]  # the fields a tree node shows
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;bad" in html
    assert '<span aria-hidden="true">■</span> terminated' in html  # a word and a symbol, not colour alone
