"""``GET /openapi.json`` is a valid OpenAPI 3.1 document and live answers match it; ``GET /metrics``
moves with real traffic and serves the conventional names."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_spec

from roost.core.api_models import ENDPOINTS
from roost.http.openapi import build_openapi
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"


def _schema_for(doc: dict[str, Any], method: str, path: str, status: int) -> dict[str, Any] | None:
    op = doc["paths"][path][method.lower()]
    resp = op["responses"].get(str(status))
    assert resp is not None, f"{method} {path} answered {status}, which the document does not list"
    content = resp["content"]
    return content["application/json"]["schema"] if "application/json" in content else None


def check(doc: dict[str, Any], method: str, path: str, status: int, body: Any) -> None:
    """Validate one live answer against the document (refs resolve inside the document)."""
    schema = _schema_for(doc, method, path, status)
    if schema is None:
        return
    jsonschema.Draft202012Validator({**schema, "components": doc["components"]}).validate(body)


@pytest.fixture
async def spec(daemon: RunningDaemon) -> dict[str, Any]:
    status, body, resp, _ = await daemon.call("GET", "/openapi.json")
    assert status == 200 and resp.content_type == "application/json"
    return body  # type: ignore[no-any-return]


def test_document_is_valid_openapi_31() -> None:
    doc = build_openapi()
    validate_spec(doc)  # openapi-spec-validator: the 3.1 meta-schema plus OpenAPI's own rules
    assert doc["openapi"] == "3.1.0"
    paths = {(ep.method, ep.path) for ep in ENDPOINTS}
    for p in (
        "/health",
        "/spawn",
        "/register",
        "/deregister",
        "/status/{session_id}",
        "/jobs",
        "/jobs/{job_id}",
        "/jobs/{job_id}/cancel",
        "/handles",
        "/resources/peer/{handle}",
        "/peer-fetch",
        "/a2a/send",
        "/a2a/tasks/get",
        "/a2a/tasks/cancel",
        "/metrics",
        "/openapi.json",
        "/livez",
        "/readyz",
    ):
        assert any(path == p for _, path in paths), p


async def test_every_tcp_route_is_documented(daemon: RunningDaemon, spec: dict[str, Any]) -> None:
    assert daemon.roost.app is not None
    documented = [re.sub(r"\{[^}]+\}", "{}", p) for p in spec["paths"]]
    for route in daemon.roost.app.router.routes():
        info = route.resource.get_info() if route.resource else {}
        path = info.get("path") or info.get("formatter") or ""
        if path.startswith("/debug/") or path in ("/healthz", "/resources/peer"):
            continue  # a benchmark probe; the deprecated alias; the bare prefix of the redeem route
        norm = re.sub(r"\{[^}]+\}", "{}", path)
        assert norm in documented or norm.startswith("/resources/peer/"), path


async def test_live_answers_match_the_document(daemon: RunningDaemon, spec: dict[str, Any]) -> None:
    async def call(method: str, path: str, template: str | None = None, **kw: Any) -> tuple[int, Any]:
        status, body, _, _ = await daemon.call(method, path, **kw)
        check(spec, method, template or path, status, body)
        return status, body

    assert (await call("GET", "/health"))[0] == 200
    sid, cred = await daemon.register_top("orchestrator")
    check(spec, "POST", "/register", 200, {"credential": cred, "door_key": "0" * 64})
    status, _ = await call("POST", "/register", json={"session_id": sid, "name": "nope", "version": "1"})
    assert status in (403, 500)
    assert (await call("POST", "/register", json={"name": "x"}))[0] == 400
    assert (await call("POST", "/spawn", json={"name": "worker", "version": "0.1.0"}, headers={CRED: cred}))[0] == 200
    assert (await call("POST", "/spawn", json={"name": "greedy", "version": "0.1.0"}, headers={CRED: cred}))[0] == 403
    assert (await call("POST", "/spawn", json={"name": "worker"}, headers={CRED: cred}))[0] == 400
    assert (await call("POST", "/spawn", data=b"[", headers={CRED: cred}))[0] == 400
    assert (await call("GET", f"/status/{sid}", "/status/{session_id}"))[0] == 200
    assert (await call("GET", "/status/ses_nope", "/status/{session_id}"))[0] == 404
    assert (await call("POST", "/jobs", json={"name": "ghost", "version": "0.1.0", "task": "x"}))[0] in (400, 403, 404)
    assert (await call("GET", "/jobs/job_" + "0" * 32, "/jobs/{job_id}"))[0] == 404
    assert (await call("POST", "/jobs/job_" + "0" * 32 + "/cancel", "/jobs/{job_id}/cancel"))[0] == 404
    assert (await call("POST", "/handles", json={"path": "x", "peer": "http://127.0.0.1:1"}))[0] == 403
    assert (await call("POST", "/handles", json={"path": "x", "peer": "http://127.0.0.1:1"}, headers={CRED: cred}))[
        0
    ] in (400, 403, 404)
    assert (await call("POST", "/peer-fetch", json={"peer": "http://127.0.0.1:1", "handle": "x"}))[0] == 403
    assert (await call("POST", "/a2a/send", json={"peer_url": "http://127.0.0.1:1", "text": "hi"}))[0] == 403
    status, _ = await call(
        "POST", "/a2a/send", json={"peer_url": "http://evil.example", "text": "hi"}, headers={CRED: cred}
    )
    assert status in (400, 403)
    assert (await call("POST", "/a2a/tasks/get", json={"peer_url": "http://127.0.0.1:1", "task_id": "t"}))[0] == 403
    assert (await call("POST", "/a2a/tasks/cancel", json={"peer_url": "http://127.0.0.1:1", "task_id": "t"}))[0] == 403
    status, _body = await call(
        "GET", "/resources/peer/mh1.bogus", "/resources/peer/{handle}", headers={"x-murmur-audience": "a@b:1"}
    )
    assert status in (400, 403, 404)
    assert (await call("POST", "/deregister", json={"outcome": "maybe"}, headers={CRED: cred}))[0] == 400
    assert (await call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred}))[0] == 200
    assert (await call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred}))[0] == 403


async def test_live_job_answers_match(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("quick", script="import sys\nprint('done: ' + sys.stdin.read())\n")
    d: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("quick",))
    spec = build_openapi()
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "quick", "version": "0.1.0", "task": "hi"})
    assert status == 201, job
    check(spec, "POST", "/jobs", 201, job)
    for _ in range(200):
        status, job, _, _ = await d.call("GET", f"/jobs/{job['job_id']}")
        check(spec, "GET", "/jobs/{job_id}", status, job)
        if job["state"] not in ("starting", "running"):
            break
        await asyncio.sleep(0.05)
    status, body, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    check(spec, "POST", "/jobs/{job_id}/cancel", status, body)
    # the launch latency histogram and jobs-by-state gauge moved
    text = (await (await d.http.get(d.url + "/metrics")).read()).decode()
    count = _sample(text, "roost_spawn_duration_seconds_count")
    assert count >= 1


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        lname, _, lab = key.partition("{")
        if lname != name:
            continue
        got = ",".join(sorted(p for p in lab.rstrip("}").split(",") if p))
        if got == want:
            return float(value)
    return 0.0


async def test_metrics_move_with_traffic(daemon: RunningDaemon) -> None:
    async def scrape() -> str:
        async with daemon.http.get(daemon.url + "/metrics") as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain; version=")
            return await resp.text()

    before = await scrape()
    for name in (
        "roost_spawn_requests_total",
        "roost_spawn_duration_seconds",
        "roost_capsules",
        "roost_jobs",
        "roost_capsule_exits_total",
        "roost_completion_deliveries_total",
        "roost_handles_minted_total",
        "roost_handle_redemptions_total",
        "roost_a2a_relay_requests_total",
        "roost_event_loop_lag_seconds",
        "roost_build_info",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in before, name
    _, cred = await daemon.register_top("orchestrator")
    assert (await daemon.spawn(cred, "worker"))[0] == 200
    assert (await daemon.spawn(cred, "greedy"))[0] == 403
    assert (await daemon.spawn("msc1.forged", "worker"))[0] == 403
    await asyncio.sleep(0.3)  # at least one loop-lag probe interval
    after = await scrape()
    assert _sample(after, "roost_spawn_requests_total", outcome="granted") == 1
    refused = sum(
        float(line.rpartition(" ")[2])
        for line in after.splitlines()
        if line.startswith("roost_spawn_requests_total{") and 'outcome="granted"' not in line
    )
    assert refused == 2
    assert _sample(after, "roost_capsules", state="running") == 1
    assert _sample(after, "roost_capsules", state="reserved") == 1
    assert _sample(after, "roost_event_loop_lag_seconds_count") > _sample(before, "roost_event_loop_lag_seconds_count")
    # the same text on the admin socket
    from ops.support import admin_http

    async with admin_http(daemon.config.admin_socket_path) as http, http.get("http://admin/metrics") as resp:
        assert resp.status == 200 and "roost_spawn_requests_total" in await resp.text()


def test_openapi_json_is_served_as_cached_bytes() -> None:
    from roost.http.openapi import openapi_document

    assert openapi_document() is openapi_document()
    assert json.loads(openapi_document())["info"]["title"] == "mur-roost"


def test_a_jobs_node_is_in_the_document() -> None:
    """``node``: where a Ray child runs (``{"node_id", "address"}``), null on this host."""
    spec = build_openapi()
    base = {"job_id": "job_" + "0" * 32, "name": "quick", "version": "0.1.0", "state": "running"}
    check(spec, "GET", "/jobs/{job_id}", 200, {**base, "node": None})
    check(spec, "GET", "/jobs/{job_id}", 200, {**base, "node": {"node_id": "ab" * 28, "address": "10.0.0.7"}})
    for wrong in ("10.0.0.7", {"node_id": "ab" * 28}):
        with pytest.raises(jsonschema.ValidationError):
            check(spec, "GET", "/jobs/{job_id}", 200, {**base, "node": wrong})
