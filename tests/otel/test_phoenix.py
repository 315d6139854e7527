"""End to end against a real OTLP backend: Arize Phoenix (from PyPI, pinned by phoenix-lock.txt,
in its own virtualenv built by phoenix-env.sh, which tests/system-deps.sh runs).

A ``mur-roost`` process exports to Phoenix by the standard ``OTEL_*`` variables. Two delegation
trees (orchestrator → worker) and a relayed send with a caller's ``traceparent`` are run; then
Phoenix's own REST API is asked for the spans: each tree is exactly one trace whose parent/child
relations are job → delegation → child job (with the referee's decision under the parent job),
and the relay's span is in the trace, and is the span, that its ``traceparent`` names. If the
environment cannot be built the test fails (it is part of the suite, not optional).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ops.support import EXAMPLES, daemon_env, roostctl, wait_for

pytestmark = pytest.mark.slow

PHOENIX_ENV = Path(__file__).with_name("phoenix-env.sh")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc = subprocess.run(["bash", str(PHOENIX_ENV)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"could not build the Phoenix environment ({PHOENIX_ENV.name}):\n{proc.stderr[-2000:]}")
    exe = proc.stdout.strip().splitlines()[-1]
    port, grpc = _free_port(), _free_port()
    work = tmp_path_factory.mktemp("phoenix")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work),
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = open(work / "phoenix.log", "wb")  # noqa: SIM115 - closed below, after the server
    server = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return bool(_get(url + "/v1/projects")["data"])
            except OSError:
                return False

        wait_for(up, timeout=180, interval=0.5)
        yield url
    finally:
        server.terminate()  # uvicorn stops on SIGTERM
        server.wait(timeout=60)
        log.close()


def _spans(url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = _get(f"{url}/v1/projects/default/spans{query}")
        out += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return out


def _attr(span: dict[str, Any], key: str) -> Any:
    """An attribute whether Phoenix kept it flat or nested it by its dots."""
    attrs = span["attributes"]
    if key in attrs:
        return attrs[key]
    node: Any = attrs
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def test_phoenix_sees_one_trace_per_delegation_tree(phoenix: str, tmp_path: Path) -> None:
    port = _free_port()
    state = tmp_path / "state"
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{EXAMPLES}"\nspawn_allow = ["orchestrator", "echo"]\nstate_dir = "{state}"\nport = {port}\n'
    )
    daemon = subprocess.Popen(
        ["mur-roost", "--config", str(cfg), "--log-format", "json"],
        env=daemon_env(OTEL_EXPORTER_OTLP_ENDPOINT=phoenix, OTEL_BSP_SCHEDULE_DELAY="200"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: roostctl("status", state_dir=state).code == 0, timeout=30, interval=0.1)
        jobs = []
        for text in ("one two three", "four five"):
            res = roostctl("spawn", "orchestrator@0.1.0", "--task", text, "--wait", "--json", state_dir=state)
            assert res.code == 0, res
            jobs.append(res.json)
        # A relayed send with a caller's traceparent, from a session registered by hand.
        echo = roostctl("spawn", "echo@0.1.0", "--task", "hi", "--json", state_dir=state).json
        wait_for(lambda: roostctl("job", echo["job_id"], "--json", state_dir=state).json["capsule_url"], timeout=30)
        peer = roostctl("job", echo["job_id"], "--json", state_dir=state).json["capsule_url"]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        workdir = tmp_path / "a"
        workdir.mkdir()
        sid = f"ses_phoenix{int(time.time())}"
        body = json.dumps({"session_id": sid, "name": "echo", "version": "0.1.0", "workdir": str(workdir)})
        with opener.open(urllib.request.Request(f"http://127.0.0.1:{port}/register", data=body.encode())) as r:
            credential = json.loads(r.read())["credential"]
        caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        send = json.dumps({"peer_url": peer, "text": "ping", "traceparent": caller}).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/a2a/send", data=send, headers={"x-murmur-spawn-credential": credential}
        )
        with opener.open(req, timeout=30) as r:
            sent = json.loads(r.read())["traceparent"]
        roostctl("cancel", echo["job_id"], state_dir=state)
    finally:
        daemon.terminate()  # a stopping daemon exports what it still holds
        daemon.wait(timeout=60)

    _, relay_trace, relay_span, _ = sent.split("-")
    want = {j["trace_id"] for j in jobs} | {relay_trace}

    def complete() -> bool:
        spans = _spans(phoenix)
        names = {(s["context"]["trace_id"], s["name"]) for s in spans}
        return all((j["trace_id"], "invoke_agent worker") in names for j in jobs) and any(
            s["context"]["span_id"] == relay_span for s in spans
        )

    wait_for(complete, timeout=60, interval=0.5)
    spans = _spans(phoenix)
    assert want <= {s["context"]["trace_id"] for s in spans}
    for job in jobs:
        tree = [s for s in spans if s["context"]["trace_id"] == job["trace_id"]]
        by_id = {s["context"]["span_id"]: s for s in tree}
        (root,) = [s for s in tree if s["parent_id"] is None]
        assert root["name"] == "invoke_agent orchestrator"
        assert _attr(root, "murmur.job_id") == job["job_id"]
        assert _attr(root, "gen_ai.operation.name") == "invoke_agent"
        (delegation,) = [s for s in tree if s["name"] == "invoke_agent worker"]
        assert delegation["parent_id"] == root["context"]["span_id"]
        children = [s for s in tree if s["parent_id"] == delegation["context"]["span_id"]]
        assert [s["name"] for s in children] == ["roost.job.run"]
        (decision,) = [s for s in tree if s["name"] == "roost.referee.spawn"]
        assert decision["parent_id"] == root["context"]["span_id"]
        # Every span of the tree hangs under its root: one connected trace.
        for s in tree:
            hops, node = 0, s
            while node["parent_id"] is not None and hops < 20:
                node, hops = by_id[node["parent_id"]], hops + 1
            assert node is root, s["name"]
        # Nothing of this tree went to another trace.
        assert not [
            s
            for s in spans
            if s["context"]["trace_id"] != job["trace_id"] and job["job_id"] in json.dumps(s["attributes"])
        ]
    (relay,) = [s for s in spans if s["context"]["span_id"] == relay_span]
    assert relay["name"] == "roost.relay.send" and relay["context"]["trace_id"] == relay_trace
    assert relay["parent_id"] == "00f067aa0ba902b7" and relay["span_kind"] in ("CLIENT", "UNKNOWN")
