"""The daemon's A2A relay against real doors: stamping, trust, allow list, failures, get/cancel."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from a2a.door import Door, DoorTask, TaskOutcome
from a2a.protocol import traceparent
from a2a.protocol.origin import Trust
from roost.core.errors import IDENTITY_REFUSAL, BadRequest
from roost.http.bodies.relay import parse_send
from roost.services.relay import stamp
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"
CALLER_TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Peer:
    def __init__(self, url: str, door: Door, tasks: list[DoorTask], headers: list[dict[str, str]]) -> None:
        self.url, self.door, self.tasks, self.headers = url, door, tasks, headers
        self.bodies: list[dict[str, Any]] = []
        self.release = asyncio.Event()


@contextlib.asynccontextmanager
async def peer_door(*, accept: bool = True, block: bool = False) -> AsyncIterator[Peer]:
    tasks: list[DoorTask] = []
    headers: list[dict[str, str]] = []
    holder: list[Peer] = []

    async def runner(task: DoorTask) -> TaskOutcome:
        tasks.append(task)
        if block:
            await holder[0].release.wait()
        return TaskOutcome.completed(f"echo: {task.text}")

    door = Door(name="peer", version="0.1.0", session_id="ses_peer", runner=runner, peer_tasks_accept=accept)

    @web.middleware
    async def capture(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST":
            headers.append({k.lower(): v for k, v in request.headers.items()})
            holder[0].bodies.append(json.loads(await request.read()))
        return await handler(request)

    door.app.middlewares.append(capture)
    r = web.AppRunner(door.app)
    await r.setup()
    await web.TCPSite(r, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{r.addresses[0][1]}"
    door.url = url
    peer = Peer(url, door, tasks, headers)
    holder.append(peer)
    try:
        yield peer
    finally:
        peer.release.set()
        await r.cleanup()


@pytest.fixture
async def relay_daemon(daemon_factory: Any, registry: RegistryBuilder) -> RunningDaemon:
    registry.add(
        "sender",
        capabilities={"network": {"allow": ["127.0.0.1"]}, "spawn": {"allow": ["child"]}},
    )
    registry.add("child", capabilities={"network": {"allow": ["127.0.0.1"]}})
    registry.add("narrow", capabilities={"network": {"allow": ["localhost:8080"]}})
    d: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("sender", "narrow"))
    return d


async def _session(
    d: RunningDaemon, name: str, workdir: Path, approval: str | None = None, door: Peer | None = None
) -> tuple[str, str]:
    """Register a session; with ``door``, as the session serving that door (which gets its seal key)."""
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    sid = f"ses_{name}_{workdir.name}"
    headers = {"x-murmur-spawn-approval": approval} if approval else None
    body_in: dict[str, Any] = {"session_id": sid, "name": name, "version": "0.1.0", "workdir": str(workdir)}
    if door is not None:
        body_in["capsule_url"] = door.url
    status, body, _, _ = await d.call("POST", "/register", json=body_in, headers=headers)
    assert status == 200, body
    assert len(body["door_key"]) == 64
    if door is not None:
        door.door.seal_key = bytes.fromhex(body["door_key"])
        door.door.session_id = sid
    return sid, body["credential"]


def _trace(workdir: Path, sid: str) -> list[dict[str, Any]]:
    path = workdir / ".murmur" / sid / "trace.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


async def test_send_stamps_headers_and_records(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    sid, cred = await _session(d, "sender", tmp_path / "s")
    async with peer_door() as peer:
        await _session(d, "narrow", tmp_path / "receiver", door=peer)
        status, body, _, _ = await d.call(
            "POST",
            "/a2a/send",
            json={
                "peer_url": peer.url,
                "text": "hello",
                "context_id": "ctx-1",
                "message_id": "msg-1",
                "traceparent": CALLER_TP,
                "tracestate": "vendor=1,other=2",
                "extra": "ignored",
            },
            headers={CRED: cred},
        )
        assert status == 200, body
        for _ in range(100):
            if peer.tasks:
                break
            await asyncio.sleep(0.02)
    assert set(body) == {"task_id", "context_id", "message_id", "traceparent", "trust", "state"}
    assert (body["context_id"], body["message_id"], body["trust"], body["state"]) == (
        "ctx-1",
        "msg-1",
        "trusted",
        "submitted",
    )
    sent = traceparent.parse(body["traceparent"])
    caller = traceparent.parse(CALLER_TP)
    assert sent is not None and caller is not None
    assert sent.trace_id == caller.trace_id and sent.parent_id != caller.parent_id
    h = peer.headers[-1]
    assert h["traceparent"] == body["traceparent"] and h["tracestate"] == "vendor=1,other=2"
    assert (h["x-murmur-task-origin"], h["x-murmur-task-trust"]) == ("peer", "trusted")
    assert h["x-murmur-task-seal"].startswith(f"v2.{sid}.")
    assert CRED not in h
    # The relay asks for an immediate answer in the dialect the card selected (1.0 here).
    assert h["a2a-version"] == "1.0" and peer.bodies[-1]["method"] == "SendMessage"
    assert peer.bodies[-1]["params"]["configuration"] == {"returnImmediately": True}
    task = peer.tasks[0]
    assert (task.origin.value, task.trust.value, task.lane.value) == ("peer", "trusted", "peer")
    assert task.owner == f"session:{sid}"
    assert task.text == "hello" and task.message_id == "msg-1" and task.id == body["task_id"]
    lines = _trace(tmp_path / "s", sid)
    assert [r["event_type"] for r in lines] == ["a2a_send"]
    assert {k: lines[0][k] for k in ("peer_url", "message_id", "task_id", "context_id", "traceparent", "trust")} == {
        "peer_url": peer.url,
        "message_id": "msg-1",
        "task_id": body["task_id"],
        "context_id": "ctx-1",
        "traceparent": body["traceparent"],
        "trust": "trusted",
    }
    ops = [(e["operation"], e["type"]) for e in d.roost.events.recent() if e["operation"] == "roost.relay.send"]
    assert ops == [("roost.relay.send", "operation.started"), ("roost.relay.send", "operation.completed")]
    assert d.roost.metrics.relay_requests.labels("send", "ok")._value.get() == 1


async def test_invalid_caller_traceparent_starts_new_trace(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    _, cred = await _session(d, "sender", tmp_path / "s")
    async with peer_door() as peer:
        status, body, _, _ = await d.call(
            "POST",
            "/a2a/send",
            json={
                "peer_url": peer.url,
                "parts": [{"text": "a"}, {"kind": "text", "text": "b"}],
                "traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
                "tracestate": "vendor=1",
            },
            headers={CRED: cred},
        )
        assert status == 200, body
        await asyncio.sleep(0.1)
    tp = traceparent.parse(body["traceparent"])
    assert tp is not None and tp.trace_id != "0" * 32
    assert "tracestate" not in peer.headers[-1]  # never forwarded without a valid caller traceparent
    assert peer.tasks[0].text == "a\nb"


async def test_trust_cannot_be_raised(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    _, parent_cred = await _session(d, "sender", tmp_path / "p")
    grant = await d.roost.referee.spawn(parent_cred, "child", "0.1.0", untrusted=True)
    child_sid, child_cred = await _session(d, "child", tmp_path / "c", approval=grant.approval)
    async with peer_door() as peer:
        status, body, _, _ = await d.call(
            "POST",
            "/a2a/send",
            json={"peer_url": peer.url, "text": "x", "trust": "trusted", "origin": "user", "lane": "user"},
            headers={
                CRED: child_cred,
                "x-murmur-task-trust": "trusted",
                "x-murmur-task-origin": "user",
                "x-murmur-delegation-id": "dlg_forged",
            },
        )
        assert status == 200, body
        await asyncio.sleep(0.1)
    assert body["trust"] == "untrusted"
    h = peer.headers[-1]
    assert (h["x-murmur-task-origin"], h["x-murmur-task-trust"]) == ("peer", "untrusted")
    assert "x-murmur-delegation-id" not in h
    # This door is no registered session, so the relay has no key to seal with: the door believes
    # no claimed origin from an unsealed caller and files the task as an untrusted event.
    assert (peer.tasks[0].origin.value, peer.tasks[0].trust.value) == ("event", "untrusted")
    assert _trace(tmp_path / "c", child_sid)[0]["trust"] == "untrusted"


async def test_network_allow_refusal(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    sid, cred = await _session(d, "narrow", tmp_path / "n")
    async with peer_door() as peer:
        status, body, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": peer.url, "text": "x"}, headers={CRED: cred}
        )
        assert not peer.headers
        for path in ("/a2a/tasks/get", "/a2a/tasks/cancel"):
            s2, b2, _, _ = await d.call(
                "POST", path, json={"peer_url": peer.url, "task_id": "tsk_1"}, headers={CRED: cred}
            )
            assert (s2, b2) == (403, {"error": f"network policy: '{peer.url}' not in capabilities.network.allow"})
    assert (status, body) == (403, {"error": f"network policy: '{peer.url}' not in capabilities.network.allow"})
    assert _trace(tmp_path / "n", sid) == []


async def test_unreachable_peer_is_502_and_records_nothing(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    sid, cred = await _session(d, "sender", tmp_path / "s")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    status, body, _, _ = await d.call("POST", "/a2a/send", json={"peer_url": url, "text": "x"}, headers={CRED: cred})
    assert status == 502 and body["error"].startswith(f"could not reach {url}: ")
    assert _trace(tmp_path / "s", sid) == []
    failed = [e for e in d.roost.events.recent() if e["type"] == "operation.failed"]
    assert failed and failed[-1]["error"]["category"] == "network"


async def test_peer_refusal_is_502_with_its_error(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    sid, cred = await _session(d, "sender", tmp_path / "s")
    async with peer_door(accept=False) as peer:
        status, body, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": peer.url, "text": "x"}, headers={CRED: cred}
        )
    assert status == 502
    assert body["error"].startswith(f"peer at {peer.url} refused the message (403 peer_not_accepted)")
    assert _trace(tmp_path / "s", sid) == []


async def test_tasks_get_and_cancel(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    _, cred = await _session(d, "sender", tmp_path / "s")
    async with peer_door(block=True) as peer:
        _, sent, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": peer.url, "text": "a"}, headers={CRED: cred}
        )
        tid = sent["task_id"]
        status, got, _, _ = await d.call(
            "POST", "/a2a/tasks/get", json={"peer_url": peer.url, "task_id": tid}, headers={CRED: cred}
        )
        assert status == 200 and got["task_id"] == tid and got["state"] in ("submitted", "working")
        status, got, _, _ = await d.call(
            "POST", "/a2a/tasks/cancel", json={"peer_url": peer.url, "task_id": tid}, headers={CRED: cred}
        )
        assert status == 200 and got["state"] == "canceled"
        _, sent2, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": peer.url, "text": "b"}, headers={CRED: cred}
        )
        peer.release.set()
        for _ in range(100):
            _, got, _, _ = await d.call(
                "POST", "/a2a/tasks/get", json={"peer_url": peer.url, "task_id": sent2["task_id"]}, headers={CRED: cred}
            )
            if got["state"] == "completed":
                break
            await asyncio.sleep(0.02)
        assert got["state"] == "completed" and got["artifacts"] == [{"name": "response", "text": "echo: b"}]
        status, err, _, _ = await d.call(
            "POST", "/a2a/tasks/get", json={"peer_url": peer.url, "task_id": "tsk_nope"}, headers={CRED: cred}
        )
        assert status == 502 and "-32001 Task not found" in err["error"]


async def test_auth_and_validation(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    _, cred = await _session(d, "sender", tmp_path / "s")
    status, body, _, _ = await d.call("POST", "/a2a/send", json={"peer_url": "127.0.0.1:9", "text": "x"})
    assert (status, body) == (403, {"error": IDENTITY_REFUSAL})
    status, body, _, _ = await d.call(
        "POST", "/a2a/send", json={"peer_url": "127.0.0.1:9", "text": "x"}, headers={CRED: "msc1.a.b"}
    )
    assert (status, body) == (403, {"error": IDENTITY_REFUSAL})
    status, body, _, _ = await d.call("POST", "/a2a/send", json={"text": "x"}, headers={CRED: cred})
    assert (status, body) == (400, {"error": "invalid JSON: missing field 'peer_url'"})
    status, body, _, _ = await d.call("POST", "/a2a/send", json={"peer_url": "127.0.0.1:9"}, headers={CRED: cred})
    assert (status, body) == (400, {"error": "a send needs 'text' or 'parts'"})
    status, body, _, _ = await d.call(
        "POST", "/a2a/send", json={"peer_url": "127.0.0.1:9", "text": 3}, headers={CRED: cred}
    )
    assert status == 400
    status, body, _, _ = await d.call(
        "POST", "/a2a/send", json={"peer_url": "127.0.0.1:9", "text": "x", "task_id": 7}, headers={CRED: cred}
    )
    assert (status, body) == (400, {"error": "invalid JSON: field 'task_id' must be a string"})


def test_stamp_is_pure_and_never_reads_trust_from_input() -> None:
    tp, headers = stamp(Trust.UNTRUSTED, CALLER_TP, "a=1")
    assert headers["x-murmur-task-origin"] == "peer" and headers["x-murmur-task-trust"] == "untrusted"
    assert tp.split("-")[1] == CALLER_TP.split("-")[1] and headers["tracestate"] == "a=1"
    req = parse_send({"peer_url": "h:1", "text": "t", "trust": "trusted", "origin": "user"})
    assert not hasattr(req, "trust") and not hasattr(req, "origin")


async def test_relay_dials_the_cards_interface_and_checks_it(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    """The card picks the URL (here a path); the network rule is checked against that URL too."""
    from tests.a2a.conformance.test_interfaces import pathed_peer

    d = relay_daemon
    sid, cred = await _session(d, "sender", tmp_path / "s")
    async with pathed_peer([("/a2a/jsonrpc/", "1.0")]) as (url, seen):
        status, body, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": url, "text": "hi"}, headers={CRED: cred}
        )
        assert status == 200, body
        status, got, _, _ = await d.call(
            "POST", "/a2a/tasks/get", json={"peer_url": url, "task_id": body["task_id"]}, headers={CRED: cred}
        )
        assert status == 200 and got["task_id"] == body["task_id"]
    assert seen == ["/a2a/jsonrpc/ 1.0", "/a2a/jsonrpc/ 1.0"]
    async with pathed_peer([]) as (url, _):
        port = url.rsplit(":", 1)[1]
        elsewhere = f"http://127.0.0.2:{port}/a2a/jsonrpc/"
    async with pathed_peer([(elsewhere, "1.0")]) as (url, seen):
        status, body, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": url, "text": "hi"}, headers={CRED: cred}
        )
    assert (status, body) == (403, {"error": f"network policy: '{elsewhere}' not in capabilities.network.allow"})
    assert seen == []
    assert [r["event_type"] for r in _trace(tmp_path / "s", sid)] == ["a2a_send"]


def test_parse_send_names_the_bad_part() -> None:
    with pytest.raises(BadRequest, match=r"^invalid JSON: field 'parts': part 1 has no text, file or data$"):
        parse_send({"peer_url": "127.0.0.1:1", "parts": [{"text": "ok"}, {"foo": 1}]})
    req = parse_send({"peer_url": "127.0.0.1:1", "text": "a", "parts": [{"kind": "data", "data": {"k": 1}}]})
    assert [(p.kind, p.text, p.data) for p in req.parts] == [("text", "a", None), ("data", None, {"k": 1})]


@contextlib.asynccontextmanager
async def listening(app: web.Application, host: str) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    try:
        yield f"http://{host}:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("card_redirects", [False, True])
async def test_a_redirect_to_a_forbidden_host_is_not_followed(
    relay_daemon: RunningDaemon, tmp_path: Path, card_redirects: bool
) -> None:
    """An allowed door (a registered session, so the relay seals) answers 307 towards a host the
    sender's network rule does not cover: nothing reaches that host, the send is a 502 sentence."""
    d = relay_daemon
    sid, cred = await _session(d, "sender", tmp_path / "s")
    reached: list[dict[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        reached.append({k.lower(): v for k, v in request.headers.items()})
        return web.json_response({"jsonrpc": "2.0", "id": "x", "result": {"task": {}}})

    forbidden_app = web.Application()
    forbidden_app.router.add_route("*", "/{tail:.*}", record)
    async with listening(forbidden_app, "127.0.0.2") as forbidden:
        stamped: list[dict[str, str]] = []

        async def redirect(request: web.Request) -> web.Response:
            if request.method == "POST":
                stamped.append({k.lower(): v for k, v in request.headers.items()})
            return web.Response(status=307, headers={"Location": forbidden + request.path})

        async def card(_request: web.Request) -> web.Response:
            return web.json_response(
                {
                    "name": "door",
                    "supportedInterfaces": [
                        {"url": allowed + "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                    ],
                }
            )

        allowed_app = web.Application()
        if not card_redirects:
            allowed_app.router.add_get("/.well-known/agent-card.json", card)
        allowed_app.router.add_route("*", "/{tail:.*}", redirect)
        async with listening(allowed_app, "127.0.0.1") as allowed:
            status, reg, _, _ = await d.call(
                "POST",
                "/register",
                json={
                    "session_id": "ses_door",
                    "name": "narrow",
                    "version": "0.1.0",
                    "workdir": str(tmp_path / "s"),
                    "capsule_url": allowed,
                },
            )
            assert status == 200, reg
            status, body, _, _ = await d.call(
                "POST", "/a2a/send", json={"peer_url": allowed, "text": "secret"}, headers={CRED: cred}
            )
            s2, b2, _, _ = await d.call(
                "POST", "/a2a/tasks/get", json={"peer_url": allowed, "task_id": "tsk_1"}, headers={CRED: cred}
            )
    assert reached == []
    assert stamped and all(h["x-murmur-task-seal"].startswith(f"v2.{sid}.") for h in stamped)
    dialled = allowed if card_redirects else allowed + "/"  # without a card: the given URL
    assert status == 502 and body["error"] == (
        f"peer at {dialled} refused the message (307): it redirects to {forbidden}/, "
        "and A2A requests are never redirected: give the URL the peer serves A2A at"
    )
    assert s2 == 502 and "never redirected" in b2["error"]
    assert _trace(tmp_path / "s", sid) == []


async def test_a_send_never_reaches_the_daemons_own_listener(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    """The network rule covers 127.0.0.1, but the daemon's own port is never a destination: not by
    its address, nor by a name that reaches it (the address the connection reached is checked)."""
    d = relay_daemon
    sid, cred = await _session(d, "sender", tmp_path / "s")
    port = d.url.rsplit(":", 1)[1].rstrip("/")
    own = f"http://127.0.0.1:{port}/"
    status, body, _, _ = await d.call("POST", "/a2a/send", json={"peer_url": own, "text": "x"}, headers={CRED: cred})
    assert (
        status == 403
        and body["error"]
        == f"network policy: '{own}' is a listener of this host's own mur-roost or door, which a session never reaches"
    )
    assert d.roost.relay.peer_refusal("127.0.0.1", int(port)) is not None
    assert d.roost.relay.peer_refusal("127.0.0.1", 9) is None
    assert not [r for r in _trace(tmp_path / "s", sid) if r["event_type"] == "a2a_send"]


async def test_a_streamed_send_is_refused_as_a_plain_one(relay_daemon: RunningDaemon, tmp_path: Path) -> None:
    d = relay_daemon
    _, cred = await _session(d, "narrow", tmp_path / "s")
    headers = {CRED: cred, "Accept": "text/event-stream"}
    async with peer_door() as peer:
        status, body, _, _ = await d.call(
            "POST", "/a2a/send", json={"peer_url": peer.url, "text": "x"}, headers=headers
        )
        assert (status, body) == (403, {"error": f"network policy: '{peer.url}' not in capabilities.network.allow"})
        assert peer.tasks == []
    sid, cred = await _session(d, "sender", tmp_path / "t")
    status, body, _, _ = await d.call(
        "POST",
        "/a2a/send",
        json={"peer_url": "http://127.0.0.1:9/", "text": "x"},
        headers={CRED: cred, "Accept": "text/event-stream"},
    )
    assert status == 502 and body["error"].startswith("could not reach http://127.0.0.1:9/")
    assert not [r for r in _trace(tmp_path / "t", sid) if r["event_type"] == "a2a_send"]


async def test_a_streamed_send_keeps_an_idle_stream_alive_with_heartbeats(
    relay_daemon: RunningDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the peer's task runs and nothing comes, the relay writes heartbeat comments to the
    sender; the updates that follow still arrive, each once, and the stream ends after the last."""
    from roost.http import relay_routes

    monkeypatch.setattr(relay_routes, "DEFAULT_HEARTBEAT_SECS", 0.05)
    d = relay_daemon
    _, cred = await _session(d, "sender", tmp_path / "s")
    async with peer_door(block=True) as peer:
        body = {"peer_url": peer.url, "text": "slow"}
        headers = {CRED: cred, "Accept": "text/event-stream"}
        async with d.http.post(d.url + "/a2a/send", json=body, headers=headers) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            first = await asyncio.wait_for(resp.content.readline(), 10)
            assert json.loads(first.removeprefix(b"data: "))["kind"] == "task"
            beats = 0
            while beats < 3:  # heartbeats keep coming while the task is held
                line = await asyncio.wait_for(resp.content.readline(), 10)
                if line == b": heartbeat\n":
                    beats += 1
            peer.release.set()
            rest = (await asyncio.wait_for(resp.content.read(), 10)).decode()
    events = [json.loads(x.removeprefix("data: ")) for x in rest.split("\n") if x.startswith("data: ")]
    assert events and events[-1]["kind"] == "status" and events[-1]["final"] is True
    assert events[-1]["state"] == "completed"
    assert [e["text"] for e in events if e["kind"] == "artifact"] == ["echo: slow"]
