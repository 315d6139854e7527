"""OpenTelemetry export end to end, against an in-process OTLP/HTTP receiver (tests/support/otlp.py).

A real ``mur-roost`` process with the standard ``OTEL_*`` variables set runs the example
orchestrator, which delegates to worker: the receiver must get one trace for the whole tree with
the parent/child relations of the daemon's spans (job, delegation, referee decision), their
semantic-convention and ``murmur.*`` attributes, and no token anywhere. A relayed send's span
is the one its ``traceparent`` names. Children get ``TRACEPARENT`` and ``OTEL_SERVICE_NAME``,
never the exporter's headers. A capsule whose manifest names ``observability.otel_endpoint``
posts one ``capsule.session`` span per task under its own trace, linked to the daemon's job span.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ops.support import REPO, daemon_env, roostctl, wait_for
from support.otlp import Got, OtlpReceiver, otlp_receiver

pytest.importorskip("opentelemetry.sdk")

SECRET = "authorization=Bearer%20otel-secret-7e1f"
ENVDUMP = """
import json, os, sys
sys.stdin.read()
print(json.dumps({k: v for k, v in os.environ.items() if k.startswith(("OTEL", "TRACE"))}))
"""
CLIENT, SERVER, INTERNAL = 3, 2, 1


@dataclass
class Env:
    state: Path
    receiver: OtlpReceiver
    daemon: subprocess.Popen[bytes]
    url: str

    def ctl(self, *args: str) -> Any:
        return roostctl(*args, state_dir=self.state)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _registry(root: Path, endpoint: str) -> Path:
    registry, caps = root / "registry", root / "capsules"
    for name in ("orchestrator", "worker", "echo"):
        shutil.copytree(REPO / "deploy" / "examples" / "capsules" / name, caps / name)
    # worker and echo post their own spans (the seeds' runtime contract; echo's door its a2a.task).
    for name in ("worker", "echo"):
        manifest = caps / name / "murmur.yaml"
        manifest.write_text(manifest.read_text() + f"observability:\n  otel_endpoint: {endpoint}\n")
    envdump = caps / "envdump"
    envdump.mkdir()
    (envdump / "main.py").write_text("#!/usr/bin/env python3\n" + ENVDUMP)
    (envdump / "main.py").chmod(0o755)
    (envdump / "murmur.yaml").write_text(
        "name: envdump\nversion: 0.1.0\nentrypoint: [main.py]\n"
        # The allow list asks for the exporter's settings: they must not come through.
        "capabilities:\n  env:\n    allow: [OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_ENDPOINT, LANG]\n"
        "lifecycle:\n  after_task: exit\n"
    )
    for name in ("orchestrator", "worker", "echo", "envdump"):
        res = roostctl("registry", "add", str(caps / name), "--registry-path", str(registry))
        assert res.code == 0, res
    return registry


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("otel")
    with otlp_receiver() as receiver:
        registry = _registry(root, receiver.endpoint)
        port = _free_port()
        cfg = root / "roost.toml"
        cfg.write_text(
            f'registry_path = "{registry}"\nspawn_allow = ["orchestrator", "echo", "envdump"]\n'
            f'state_dir = "state"\nport = {port}\n'
            # The same keys in roost.toml: the sampler comes from the file, the endpoint from the env.
            'otel_traces_sampler = "parentbased_always_on"\n'
        )
        state = root / "state"
        daemon = subprocess.Popen(
            [sys.executable, "-m", "roost", "--config", str(cfg), "--log-format", "json"],
            env=daemon_env(
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
                OTEL_EXPORTER_OTLP_HEADERS=SECRET,
                OTEL_BSP_SCHEDULE_DELAY="100",
                OTEL_SERVICE_NAME="roost-under-test",
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: roostctl("status", state_dir=state).code == 0, timeout=30, interval=0.1)
            yield Env(state, receiver, daemon, f"http://127.0.0.1:{port}")
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)


def _one(spans: list[Got], name: str, **attrs: object) -> Got:
    hits = [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attrs.items())]
    assert len(hits) == 1, (name, attrs, [(s.name, s.attributes) for s in spans])
    return hits[0]


def test_a_delegation_tree_is_one_trace(env: Env) -> None:
    res = env.ctl("spawn", "orchestrator@0.1.0", "--task", "count these words", "--wait", "--json")
    assert res.code == 0, res
    job = res.json
    assert job["trace_id"] and len(job["trace_id"]) == 32

    def tree_done(spans: list[Got]) -> bool:
        return any(s.name == "roost.job.run" and s.attributes.get("roost.job.name") == "worker" for s in spans) and any(
            s.name == "invoke_agent orchestrator" for s in spans
        )

    got = env.receiver.wait_for(tree_done)
    mine = [s for s in got if s.trace_id == job["trace_id"]]
    orch = _one(mine, "invoke_agent orchestrator", **{"murmur.job_id": job["job_id"]})
    assert orch.parent_span_id == ""  # the tree's root: roostctl sent no traceparent
    assert orch.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert orch.attributes["gen_ai.agent.name"] == "orchestrator"
    assert orch.attributes["gen_ai.agent.id"] == job["session_id"]
    assert orch.attributes["murmur.session_id"] == job["session_id"]
    assert orch.attributes["murmur.capsule"] == "orchestrator@0.1.0"
    assert orch.attributes["murmur.outcome"] == "ok"
    delegation = _one(mine, "invoke_agent worker")
    assert delegation.kind == CLIENT and delegation.parent_span_id == orch.span_id
    assert delegation.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert delegation.attributes["murmur.parent_session_id"] == job["session_id"]
    worker = _one(mine, "roost.job.run", **{"roost.job.name": "worker"})
    assert worker.parent_span_id == delegation.span_id
    assert worker.attributes["murmur.outcome"] == "ok" and worker.attributes["murmur.capsule"] == "worker@0.1.0"
    decision = _one(mine, "roost.referee.spawn")
    assert decision.parent_span_id == orch.span_id
    assert decision.attributes["murmur.outcome"] == "allowed"
    assert decision.attributes["murmur.capsule"] == "worker@0.1.0"
    assert decision.start_ns <= delegation.start_ns <= worker.start_ns <= worker.end_ns <= orch.end_ns
    assert {s.resource["service.name"] for s in mine} == {"roost-under-test"}
    # One trace per tree: nothing of this tree is in another trace.
    assert not [s for s in got if s.attributes.get("murmur.job_id") == job["job_id"] and s.trace_id != job["trace_id"]]
    # The exporter's headers went to the receiver, and nowhere else.
    assert orch.headers.get("authorization") == "Bearer otel-secret-7e1f"
    text = json.dumps([s.attributes for s in got])
    assert "otel-secret" not in text and "msc1." not in text and "msa1." not in text
    config = env.ctl("config", "--json").json
    assert config["otel_exporter_otlp_headers"] is None  # set in the env, not the file
    assert "otel-secret" not in env.ctl("config", "--json").out


def test_the_worker_posts_a_capsule_session_span_linked_to_its_job(env: Env) -> None:
    res = env.ctl("spawn", "orchestrator@0.1.0", "--task", "one two", "--wait", "--json")
    assert res.code == 0, res
    trace_id = res.json["trace_id"]

    def linked(spans: list[Got]) -> bool:
        return any(s.name == "capsule.session" and any(t == trace_id for t, _ in s.links) for s in spans)

    got = env.receiver.wait_for(linked)
    session = next(s for s in got if s.name == "capsule.session" and any(t == trace_id for t, _ in s.links))
    assert session.trace_id != trace_id  # the task's own trace (the seeds' rule)
    assert session.resource == {"service.name": "worker", "service.version": "0.1.0"}
    assert session.attributes["exit_status"] == "ok"
    worker_job = next(
        s
        for s in got
        if s.trace_id == trace_id and s.name == "roost.job.run" and s.attributes["roost.job.name"] == "worker"
    )
    assert session.links == [(trace_id, worker_job.span_id)]


def test_children_get_traceparent_and_no_exporter_secret(env: Env) -> None:
    res = env.ctl("spawn", "envdump@0.1.0", "--task", "x", "--wait", "--json")
    assert res.code == 0, res
    seen = json.loads(Path(res.json["workdir"], "out", "result.txt").read_text())
    assert seen["OTEL_SERVICE_NAME"] == "envdump"
    assert seen["TRACEPARENT"].split("-")[1] == res.json["trace_id"]
    assert not [k for k in seen if k.startswith("OTEL_EXPORTER")], seen
    assert "otel-secret" not in json.dumps(seen)


def test_a_relayed_send_is_the_span_its_traceparent_names(env: Env, tmp_path: Path) -> None:
    echo = env.ctl("spawn", "echo@0.1.0", "--task", "hi", "--json").json
    wait_for(lambda: env.ctl("job", echo["job_id"], "--json").json["capsule_url"], timeout=30)
    peer = env.ctl("job", echo["job_id"], "--json").json["capsule_url"]
    import urllib.request

    def post(path: str, body: dict[str, object], headers: dict[str, str] | None = None) -> dict[str, Any]:
        req = urllib.request.Request(
            env.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    workdir = tmp_path / "a"
    workdir.mkdir()
    sid = f"ses_otel{os.getpid()}{int(time.time())}"
    reg = post("/register", {"session_id": sid, "name": "echo", "version": "0.1.0", "workdir": str(workdir)})
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    sent = post(
        "/a2a/send",
        {"peer_url": peer, "text": "ping", "traceparent": caller},
        {"x-murmur-spawn-credential": reg["credential"]},
    )
    _, trace_id, span_id, _ = sent["traceparent"].split("-")
    assert trace_id == "0af7651916cd43dd8448eb211c80319c"
    got = env.receiver.wait_for(lambda spans: any(s.span_id == span_id for s in spans))
    relay = next(s for s in got if s.span_id == span_id)
    assert relay.name == "roost.relay.send" and relay.kind == CLIENT
    assert relay.trace_id == trace_id and relay.parent_span_id == "b7ad6b7169203331"
    assert relay.attributes["rpc.system"] == "jsonrpc" and relay.attributes["rpc.method"] == "send"
    assert relay.attributes["http.request.method"] == "POST" and relay.attributes["url.full"] == peer
    assert relay.attributes["server.address"] == "127.0.0.1"
    assert relay.attributes["murmur.session_id"] == sid
    # The door that took the message reports its task in the same trace, under the relay's span.
    got = env.receiver.wait_for(lambda spans: any(s.parent_span_id == span_id for s in spans))
    door = next(s for s in got if s.parent_span_id == span_id)
    assert door.name == "a2a.task" and door.kind == SERVER and door.trace_id == trace_id
    assert door.resource["service.name"] == "echo" and door.attributes["rpc.system"] == "jsonrpc"
    # Without a caller's traceparent, a session's send continues its own job's trace.
    plain = post("/a2a/send", {"peer_url": peer, "text": "pong"}, {"x-murmur-spawn-credential": reg["credential"]})
    assert plain["traceparent"].split("-")[1] != trace_id
    env.ctl("cancel", echo["job_id"])
