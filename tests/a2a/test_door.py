"""End-to-end door tests: a real aiohttp server on an ephemeral port, driven by raw HTTP and A2AClient."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from a2a.client import A2AClient
from a2a.door import PEER_NOT_ACCEPTED_BODY, TAKES_NO_TASKS, Door, DoorTask, TaskOutcome
from a2a.protocol import seal, traceparent
from a2a.protocol.models import Message, Part, TaskState, parse_message_lean
from a2a.protocol.origin import Lane, Origin, Provenance, Trust
from tests.support.doorserve import serve_door

SESSION = "ses_0123456789abcdef0123456789abcdef"
SEAL_KEY = bytes(range(32))


class Gate:
    """A runner the test controls: records every task, blocks until released (unless open)."""

    def __init__(self, *, open_: bool = False) -> None:
        self.seen: list[DoorTask] = []
        self.started = asyncio.Queue[DoorTask]()
        self.release = asyncio.Event()
        if open_:
            self.release.set()
        self.cancelled: list[str] = []
        self.finished: list[tuple[str, TaskState]] = []
        self.activated: list[str] = []

    async def __call__(self, task: DoorTask) -> TaskOutcome:
        self.seen.append(task)
        await self.started.put(task)
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.append(task.id)
            raise
        if task.text == "fail":
            return TaskOutcome.failed("it failed")
        if task.text == "boom":
            raise RuntimeError("secret internals")
        return TaskOutcome.completed(f"echo: {task.text}")

    async def on_activate(self, task: DoorTask) -> None:
        self.activated.append(task.id)

    async def on_finish(self, task: DoorTask, outcome: TaskOutcome) -> None:
        self.finished.append((task.id, outcome.state))


def make_door(gate: Gate, **kw: Any) -> Door:
    kw.setdefault("peer_tasks_accept", True)
    return Door(
        name="echo",
        version="1.2.3",
        session_id=SESSION,
        runner=gate,
        on_activate=gate.on_activate,
        on_finish=gate.on_finish,
        **kw,
    )


serve = serve_door  # as the capsule host serves it


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def rpc(
    http: aiohttp.ClientSession,
    url: str,
    method: str,
    params: Any = None,
    *,
    headers: dict[str, str] | None = None,
    v1: bool | None = None,
    rid: Any = "r1",
) -> dict[str, Any]:
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if v1 or (v1 is None and method[0].isupper()):
        hdrs.setdefault("A2A-Version", "1.0")
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    async with http.post(url + "/", data=json.dumps(body), headers=hdrs) as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        out = json.loads(await resp.read())
        assert isinstance(out, dict)
        return out


def msg03(text: str, **extra: Any) -> dict[str, Any]:
    """A 0.3 send of ``text``; a fresh message id each time (a repeated one is answered as a retry)."""
    return {
        "message": {
            "kind": "message",
            "messageId": f"msg-{uuid.uuid4()}",
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
            **extra,
        }
    }


def msg10(text: str) -> dict[str, Any]:
    return {
        "message": {"messageId": f"msg-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": True},
    }


async def wait_state(http: aiohttp.ClientSession, url: str, task_id: str, state: str) -> dict[str, Any]:
    for _ in range(200):
        r = await rpc(http, url, "tasks/get", {"id": task_id})
        result: dict[str, Any] = r["result"]
        if result["status"]["state"] == state:
            return result
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} never reached {state}: {r}")


# --- both dialects end to end -------------------------------------------------------------------


async def test_send_get_0_3_raw(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate)
    async with serve(door) as url:
        r = await rpc(http, url, "message/send", msg03("hello", contextId="ctx-1"))
        assert r["jsonrpc"] == "2.0" and r["id"] == "r1"
        task = r["result"]
        assert task["kind"] == "task"
        assert task["id"].startswith("tsk_") and len(task["id"]) == 36
        assert task["contextId"] == "ctx-1"
        assert task["status"]["state"] == "submitted"
        done = await wait_state(http, url, task["id"], "completed")
        assert done["artifacts"] == [
            {"artifactId": "response", "name": "response", "parts": [{"kind": "text", "text": "echo: hello"}]}
        ]
        status_msg = done["status"]["message"]
        assert status_msg["role"] == "agent"
        assert status_msg["messageId"].startswith(f"msg_{task['id']}_")
        assert status_msg["parts"] == [{"kind": "text", "text": "echo: hello"}]
        assert done["status"]["timestamp"].endswith("Z") and "T" in done["status"]["timestamp"]
    assert gate.activated == [task["id"]]
    assert gate.finished == [(task["id"], TaskState.COMPLETED)]


async def test_send_get_1_0_raw(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate)
    async with serve(door) as url:
        r = await rpc(http, url, "SendMessage", msg10("hi"))
        task = r["result"]["task"]
        assert "kind" not in task
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert task["contextId"].startswith("ctx_")
        for _ in range(200):
            got = (await rpc(http, url, "GetTask", {"id": task["id"]}))["result"]
            if got["status"]["state"] == "TASK_STATE_COMPLETED":
                break
            await asyncio.sleep(0.01)
        assert "task" not in got  # GetTask returns a bare Task
        assert got["artifacts"] == [{"artifactId": "response", "name": "response", "parts": [{"text": "echo: hi"}]}]
        assert got["status"]["message"]["role"] == "ROLE_AGENT"
        assert "kind" not in got["status"]["message"]


@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
async def test_client_round_trip(dialect: str) -> None:
    gate = Gate(open_=True)
    door = make_door(gate)
    async with serve(door) as url, A2AClient() as client:
        m = Message(message_id="m-7", role="user", parts=[Part(kind="text", text="ping")])
        sent = await client.send_message(url, m, dialect=dialect)  # type: ignore[arg-type]
        assert sent.status.state is TaskState.SUBMITTED
        for _ in range(200):
            got = await client.get_task(url, sent.id, dialect=dialect)  # type: ignore[arg-type]
            if got.status.state is TaskState.COMPLETED:
                break
            await asyncio.sleep(0.01)
        assert got.artifacts is not None and got.artifacts[0].parts[0].text == "echo: ping"
        assert gate.seen[0].message_id == "m-7"
        assert gate.seen[0].dialect == dialect


async def test_client_picks_1_0_from_card() -> None:
    gate = Gate(open_=True)
    async with serve(make_door(gate)) as url, A2AClient() as client:
        assert await client.dialect_for(url) == "1.0"
        sent = await client.send_message(url, Message(message_id="x", role="user", parts=[Part(kind="text", text="a")]))
        assert sent.status.state is TaskState.SUBMITTED
        await door_idle(gate)
        assert gate.seen[0].dialect == "1.0"


async def door_idle(gate: Gate) -> None:
    for _ in range(200):
        if gate.finished:
            return
        await asyncio.sleep(0.01)


async def test_failed_and_raising_runner(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    async with serve(make_door(gate)) as url:
        t1 = (await rpc(http, url, "message/send", msg03("fail")))["result"]["id"]
        t2 = (await rpc(http, url, "message/send", msg03("boom")))["result"]["id"]
        r1 = await wait_state(http, url, t1, "failed")
        r2 = await wait_state(http, url, t2, "failed")
        assert r1["status"]["message"]["parts"][0]["text"] == "it failed"
        assert "secret" not in json.dumps(r2)
        assert "artifacts" not in r1


# --- cancel -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("send", "cancel", "canceled"),
    [("message/send", "tasks/cancel", "canceled"), ("SendMessage", "CancelTask", "TASK_STATE_CANCELED")],
)
async def test_cancel_queued_and_running(http: aiohttp.ClientSession, send: str, cancel: str, canceled: str) -> None:
    gate = Gate()
    door = make_door(gate)
    params = msg03 if send == "message/send" else msg10
    async with serve(door) as url:
        r = await rpc(http, url, send, params("first"))
        first = r["result"]["task"]["id"] if send == "SendMessage" else r["result"]["id"]
        running = await asyncio.wait_for(gate.started.get(), 5)
        assert running.id == first
        r = await rpc(http, url, send, params("second"))
        second = r["result"]["task"]["id"] if send == "SendMessage" else r["result"]["id"]
        # queued: removed at once, never reaches the runner
        c = await rpc(http, url, cancel, {"id": second})
        assert c["result"]["status"]["state"] == canceled
        assert door.queue.pending == 0
        # running: recorded canceled immediately, runner cancelled
        c = await rpc(http, url, cancel, {"id": first})
        assert c["result"]["status"]["state"] == canceled
        g = await rpc(http, url, "tasks/get", {"id": first})
        assert g["result"]["status"]["state"] == "canceled"
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        assert gate.cancelled == [first]
        assert [t.id for t in gate.seen] == [first]
        assert gate.finished == [(first, TaskState.CANCELED)]
        g = await rpc(http, url, "tasks/get", {"id": first})
        assert g["result"]["status"]["state"] == "canceled"
        # cancel again → -32002 with the exact sentence
        again = await rpc(http, url, "tasks/cancel", {"id": first})
        assert again["error"] == {"code": -32002, "message": f"task {first} is already canceled and cannot be canceled"}


async def test_canceled_wins_over_runner_result(http: aiohttp.ClientSession) -> None:
    started = asyncio.Event()

    async def stubborn(task: DoorTask) -> TaskOutcome:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return TaskOutcome.completed("I finished anyway")
        return TaskOutcome.completed("x")

    door = Door(name="s", version="1", session_id=SESSION, runner=stubborn)
    async with serve(door) as url:
        tid = (await rpc(http, url, "message/send", msg03("x")))["result"]["id"]
        await asyncio.wait_for(started.wait(), 5)
        await rpc(http, url, "tasks/cancel", {"id": tid})
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        g = (await rpc(http, url, "tasks/get", {"id": tid}))["result"]
        assert g["status"]["state"] == "canceled"
        assert "artifacts" not in g


async def test_cancel_completed_and_unknown(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    async with serve(make_door(gate)) as url:
        tid = (await rpc(http, url, "message/send", msg03("x")))["result"]["id"]
        await wait_state(http, url, tid, "completed")
        r = await rpc(http, url, "CancelTask", {"id": tid})
        assert r["error"] == {"code": -32002, "message": f"task {tid} is already completed and cannot be canceled"}
        r = await rpc(http, url, "tasks/cancel", {"id": "tsk_nope"})
        assert r["error"] == {"code": -32001, "message": "Task not found"}
        r = await rpc(http, url, "tasks/get", {"id": "tsk_nope"})
        assert r["error"] == {"code": -32001, "message": "Task not found"}
        r = await rpc(http, url, "GetTask", {"id": "tsk_nope"})
        assert r["error"] == {"code": -32001, "message": "Task not found"}


# --- capacity -----------------------------------------------------------------------------------


async def test_queue_full_rejects_as_result(http: aiohttp.ClientSession) -> None:
    gate = Gate()
    door = make_door(gate, queue_depth=1)
    async with serve(door) as url:
        await rpc(http, url, "message/send", msg03("a"))
        await asyncio.wait_for(gate.started.get(), 5)
        assert (await rpc(http, url, "message/send", msg03("b")))["result"]["status"]["state"] == "submitted"
        r = await rpc(http, url, "message/send", msg03("c"))
        assert "error" not in r
        assert r["result"]["status"]["state"] == "rejected"
        assert r["result"]["status"]["message"]["parts"][0]["text"] == "task rejected: capsule is busy"
        r10 = await rpc(http, url, "SendMessage", msg10("d"))
        assert r10["result"]["task"]["status"]["state"] == "TASK_STATE_REJECTED"
        # a rejected task can still be read back
        g = await rpc(http, url, "tasks/get", {"id": r["result"]["id"]})
        assert g["result"]["status"]["state"] == "rejected"
        door.close()
        gate.release.set()
        await asyncio.wait_for(door.drain(), 5)
        r = await rpc(http, url, "message/send", msg03("e"))
        assert r["result"]["status"]["state"] == "rejected"
        assert r["result"]["status"]["message"]["parts"][0]["text"] == "task rejected: the session is closing"


async def test_single_acceptance_is_one_task_ever(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate, task_acceptance="single")
    async with serve(door) as url:
        assert (await rpc(http, url, "message/send", msg03("a")))["result"]["status"]["state"] == "submitted"
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        r = await rpc(http, url, "message/send", msg03("b"))
        assert r["result"]["status"]["state"] == "rejected"


async def test_acceptance_none_is_unsupported(http: aiohttp.ClientSession) -> None:
    door = make_door(Gate(), task_acceptance="none")
    async with serve(door) as url:
        for method, params in (("message/send", msg03("a")), ("SendMessage", msg10("a"))):
            r = await rpc(http, url, method, params)
            assert r["error"] == {"code": -32004, "message": f"Unsupported operation: {TAKES_NO_TASKS}"}
        async with http.get(url + "/.well-known/agent-card.json") as resp:
            card = await resp.json()
        assert card["skills"] == []


# --- lanes --------------------------------------------------------------------------------------


async def test_lane_order_user_peer_bg(http: aiohttp.ClientSession) -> None:
    gate = Gate()
    door = make_door(gate, seal_key=SEAL_KEY)
    peer = {"x-murmur-task-origin": "peer", "x-murmur-task-trust": "trusted"}

    async def relayed(text: str) -> None:  # a peer's send, sealed as the daemon's relay seals it
        params = msg03(text)
        await rpc(http, url, "message/send", params, headers=sealed(peer, subject_of(params)))

    async with serve(door) as url:
        await rpc(http, url, "message/send", msg03("blocker"))
        await asyncio.wait_for(gate.started.get(), 5)
        await rpc(http, url, "message/send", msg03("bg-1"))  # no origin → event → bg
        await relayed("peer-1")
        await rpc(http, url, "message/send", msg03("bg-2"), headers={"x-murmur-task-origin": "user"})
        await rpc(http, url, "message/send", msg03("bg-3"), headers=peer)  # claimed, unsealed: event → bg
        door.submit("user-1")
        await relayed("peer-2")
        door.submit("user-2")
        assert door.queue.pending == 7
        gate.release.set()
        await asyncio.wait_for(door.queue.wait_idle(), 5)
    assert [t.text for t in gate.seen] == ["blocker", "user-1", "user-2", "peer-1", "peer-2", "bg-1", "bg-2", "bg-3"]
    lanes = {t.text: t.lane for t in gate.seen}
    assert lanes["user-1"] is Lane.USER and lanes["peer-1"] is Lane.PEER and lanes["bg-2"] is Lane.BG
    assert lanes["bg-3"] is Lane.BG


# --- classification -----------------------------------------------------------------------------

HEADER_CASES = [
    ({}, Origin.EVENT, Trust.UNTRUSTED),
    ({"x-murmur-task-origin": "peer", "x-murmur-task-trust": "trusted"}, Origin.PEER, Trust.TRUSTED),
    ({"x-murmur-task-origin": "PEER", "x-murmur-task-trust": "Trusted"}, Origin.PEER, Trust.TRUSTED),
    ({"x-murmur-task-origin": "peer"}, Origin.EVENT, Trust.UNTRUSTED),  # a seal needs both headers
    ({"x-murmur-task-origin": "peer", "x-murmur-task-trust": "yes"}, Origin.PEER, Trust.UNTRUSTED),
    ({"x-murmur-task-origin": "user", "x-murmur-task-trust": "trusted"}, Origin.EVENT, Trust.UNTRUSTED),
    ({"x-murmur-task-origin": "system", "x-murmur-task-trust": "trusted"}, Origin.EVENT, Trust.UNTRUSTED),
    ({"x-murmur-task-origin": "schedule", "x-murmur-task-trust": "trusted"}, Origin.EVENT, Trust.UNTRUSTED),
    ({"x-murmur-task-trust": "trusted"}, Origin.EVENT, Trust.UNTRUSTED),
    ({"x-murmur-task-origin": " peer", "x-murmur-task-trust": "trusted "}, Origin.PEER, Trust.TRUSTED),
]


def subject_of(params: dict[str, Any], delegation_id: str | None = None) -> str:
    """What the daemon's seal covers for a send of ``params``' message (:func:`a2a.protocol.seal.send_subject`)."""
    return seal.send_subject(parse_message_lean(params["message"]), delegation_id)


def sealed(headers: dict[str, str], subject: str, key: bytes = SEAL_KEY, sender: str = "ses_sender") -> dict[str, str]:
    """``headers`` plus the relay's seal over them, as the daemon would stamp it."""
    value = seal.seal(
        key,
        sender=sender,
        receiver=SESSION,
        origin=headers.get("x-murmur-task-origin", "").strip(),
        trust=headers.get("x-murmur-task-trust", "").strip(),
        traceparent=headers.get("traceparent", ""),
        subject=subject,
    )
    return {**headers, seal.SEAL_HEADER: value}


async def test_classification_at_the_door(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate, seal_key=SEAL_KEY)
    async with serve(door) as url:
        for headers, _, _ in HEADER_CASES:
            params = msg03("x")
            await rpc(http, url, "message/send", params, headers=sealed(headers, subject_of(params)))
        for headers, _, _ in HEADER_CASES:  # unsealed, sealed with another key, or over another message
            await rpc(http, url, "message/send", msg03("x"), headers=headers)
            params = msg03("x")
            await rpc(http, url, "message/send", params, headers=sealed(headers, subject_of(params), key=b"k" * 32))
            await rpc(http, url, "message/send", msg03("x"), headers=sealed(headers, "another-message"))
        await asyncio.wait_for(door.queue.wait_idle(), 5)
    got = [(t.origin, t.trust) for t in gate.seen]
    # HTTP strips surrounding whitespace from header values, so " peer" reads as peer.
    n = len(HEADER_CASES)
    assert got[:n] == [(o, t) for _, o, t in HEADER_CASES]
    assert got[n:] == [(Origin.EVENT, Trust.UNTRUSTED)] * (3 * n)  # whatever origin they claim
    assert all(t.origin not in (Origin.USER, Origin.SCHEDULE, Origin.SYSTEM) for t in gate.seen)


async def test_completion_addressing(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate, seal_key=SEAL_KEY)
    base = {"x-murmur-task-origin": "completion", "x-murmur-task-trust": "trusted", "x-murmur-delegation-id": "dlg_1"}
    async with serve(door) as url:
        for addressed in ({}, {"x-murmur-completion-session": "ses_other"}):
            params = msg03("done")
            r = await rpc(
                http, url, "message/send", params, headers=sealed({**base, **addressed}, subject_of(params, "dlg_1"))
            )
            shown = addressed.get("x-murmur-completion-session", "<unaddressed>")
            assert r["error"] == {
                "code": -32004,
                "message": f"completion is addressed to session {shown}, which is not the session running here",
            }
        params = msg03("done")
        headers = sealed({**base, "x-murmur-completion-session": SESSION}, subject_of(params, "dlg_1"))
        r = await rpc(http, url, "message/send", params, headers=headers)
        assert r["result"]["status"]["state"] == "submitted"
        # unsealed, the same claim is an event: no delegation id, and no addressing to check
        forged = {**base, "x-murmur-completion-session": SESSION}
        r = await rpc(http, url, "message/send", msg03("forged"), headers=forged)
        assert r["result"]["status"]["state"] == "submitted"
        await asyncio.wait_for(door.queue.wait_idle(), 5)
    completion, forged_task = gate.seen
    assert (completion.origin, completion.trust, completion.lane) == (Origin.COMPLETION, Trust.TRUSTED, Lane.BG)
    assert completion.delegation_id == "dlg_1"
    assert (forged_task.origin, forged_task.trust, forged_task.delegation_id) == (Origin.EVENT, Trust.UNTRUSTED, None)


async def test_peer_consent(http: aiohttp.ClientSession) -> None:
    door = make_door(Gate(open_=True), peer_tasks_accept=False)
    async with serve(door) as url:
        for origin in ("peer", "PEER"):
            async with http.post(
                url + "/",
                data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": msg03("x")}),
                headers={"Content-Type": "application/json", "x-murmur-task-origin": origin},
            ) as resp:
                assert resp.status == 403
                assert await resp.read() == PEER_NOT_ACCEPTED_BODY
        assert json.loads(PEER_NOT_ACCEPTED_BODY) == {
            "error": "peer_not_accepted",
            "message": "this capsule does not accept tasks from peers (exports.peer_tasks.accept is not true)",
        }
        # non-peer callers are still served
        r = await rpc(http, url, "message/send", msg03("x"))
        assert r["result"]["status"]["state"] == "submitted"
        async with http.get(url + "/.well-known/agent-card.json") as resp:
            card = await resp.json()
        door_ext = next(e for e in card["capabilities"]["extensions"] if e["uri"].endswith("#murmur-door-v1"))
        assert door_ext["params"]["peerTasks"] is False


async def test_traceparent_continuation(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate)
    caller = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"
    async with serve(door) as url:
        await rpc(
            http, url, "message/send", msg03("a"), headers={"traceparent": caller, "tracestate": "congo=t61rcWkgMzE"}
        )
        await rpc(http, url, "message/send", msg03("b"), headers={"traceparent": "00-zz-bad-01", "tracestate": "a=b"})
        await rpc(http, url, "message/send", msg03("c"))
        await rpc(
            http, url, "message/send", msg03("d"), headers={"traceparent": caller.lower(), "tracestate": "Bad Key=1"}
        )
        await asyncio.wait_for(door.queue.wait_idle(), 5)
    a, b, c, d = gate.seen
    assert a.traceparent_from_caller == caller.lower()
    assert a.trace.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert a.trace.parent_id != "00f067aa0ba902b7"
    assert a.trace.flags == "01"
    assert a.tracestate == "congo=t61rcWkgMzE"
    assert b.traceparent_from_caller == "00-zz-bad-01"
    assert traceparent.parse(b.trace.format()) is not None
    assert b.trace.trace_id != a.trace.trace_id and b.tracestate is None
    assert c.traceparent_from_caller is None and traceparent.parse(c.trace.format()) is not None
    assert d.trace.trace_id == a.trace.trace_id and d.tracestate is None


# --- JSON-RPC errors ----------------------------------------------------------------------------


async def post_raw(http: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
    async with http.post(url + "/", data=body, headers={"Content-Type": "application/json", **(headers or {})}) as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        return await resp.json()


async def test_envelope_errors(http: aiohttp.ClientSession) -> None:
    async with serve(make_door(Gate())) as url:
        r = await post_raw(http, url, b"{not json")
        assert r == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        assert (await post_raw(http, url, b""))["error"]["code"] == -32700
        for body in (b"[]", b"42", b'"x"'):
            r = await post_raw(http, url, body)
            assert r["id"] is None and r["error"]["code"] == -32600, body
            assert set(r["error"]) == {"code", "message"}
        r = await post_raw(http, url, b'{"jsonrpc":"1.0","id":7,"method":"tasks/get"}')
        assert r["id"] == 7 and r["error"]["code"] == -32600
        r = await post_raw(http, url, b'{"jsonrpc":"2.0","id":7,"method":5}')
        assert r["error"]["code"] == -32600
        r = await post_raw(http, url, b'{"jsonrpc":"2.0","id":{"a":1},"method":"tasks/get"}')
        assert r["id"] is None and r["error"]["code"] == -32600
        r = await post_raw(http, url, b'{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":[1]}')
        assert r["error"] == {"code": -32602, "message": "Invalid params: params must be an object"}


@pytest.mark.parametrize("method", ["Message/Send", "message/send ", "session/stop", "tasks/send", "listTasks"])
async def test_method_not_found(http: aiohttp.ClientSession, method: str) -> None:
    async with serve(make_door(Gate())) as url:
        r = await rpc(http, url, method, {}, v1=False)
        assert r["error"] == {"code": -32601, "message": "Method not found"}


@pytest.mark.parametrize(
    ("message", "detail"),
    [
        ({"kind": "message", "messageId": 5, "role": "user", "parts": []}, "messageId must be a non-empty string"),
        ({"kind": "message", "role": "user", "parts": []}, "messageId must be a non-empty string"),
        ({"kind": "message", "messageId": "m", "parts": []}, 'role must be "user" or "agent"'),
        ({"kind": "message", "messageId": "m", "role": "user", "parts": "hi"}, "parts must be a list of objects"),
        ({"kind": "message", "messageId": "m", "role": "user", "parts": ["hi"]}, "part 0 must be an object"),
        (
            {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": 3}]},
            "part 0 of kind text needs a text string",
        ),
        (
            {
                "kind": "message",
                "messageId": "m",
                "role": "user",
                "parts": [{"kind": "text", "text": "x"}],
                "contextId": 4,
            },
            "contextId must be a string or null",
        ),
        ({"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]}, 'kind "message"'),
        ("just text", "message must be an object"),
    ],
)
async def test_invalid_params(http: aiohttp.ClientSession, message: Any, detail: str) -> None:
    async with serve(make_door(Gate())) as url:
        r = await rpc(http, url, "message/send", {"message": message})
        assert r["error"]["code"] == -32602 and r["error"]["message"].startswith("Invalid params: "), r
        assert detail in r["error"]["message"], r


async def test_message_shapes(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate)
    async with serve(door) as url:
        # contextId null, mixed parts, extra fields
        r = await rpc(
            http,
            url,
            "message/send",
            {
                "message": {
                    "kind": "message",
                    "messageId": "a",
                    "role": "user",
                    "contextId": None,
                    "parts": [
                        {"kind": "text", "text": "x"},
                        {"kind": "data", "data": {"k": 1}},
                        {"kind": "text", "text": "y"},
                    ],
                    "extra": 1,
                }
            },
        )
        assert r["result"]["contextId"].startswith("ctx_")
        r = await rpc(
            http,
            url,
            "SendMessage",
            {
                "message": {
                    "messageId": "c",
                    "role": "ROLE_USER",
                    "parts": [{"url": "file:///x", "mediaType": "text/plain"}, {"text": "w"}],
                },
                "configuration": {"returnImmediately": True},
            },
        )
        assert r["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        await asyncio.wait_for(door.queue.wait_idle(), 5)
    assert [t.text for t in gate.seen] == ["x\ny", "w"]
    assert gate.seen[1].parts[0].file is not None and gate.seen[1].parts[0].file.uri == "file:///x"


async def test_content_type_not_supported(http: aiohttp.ClientSession) -> None:
    async with serve(make_door(Gate())) as url:
        r = await rpc(
            http, url, "SendMessage", {"message": {"messageId": "c", "role": "ROLE_USER", "parts": [{"raw": "aGk="}]}}
        )
        assert r["error"] == {
            "code": -32005,
            "message": "Content type not supported: inline file bytes are not accepted; send a uri",
        }
        r = await rpc(
            http,
            url,
            "message/send",
            {
                "message": {
                    "kind": "message",
                    "messageId": "c",
                    "role": "user",
                    "parts": [{"kind": "file", "file": {"bytes": "aGk="}}],
                }
            },
        )
        assert r["error"]["code"] == -32005


async def test_id_required(http: aiohttp.ClientSession) -> None:
    async with serve(make_door(Gate())) as url:
        r = await rpc(http, url, "tasks/cancel", {})
        assert r["error"] == {"code": -32602, "message": "Invalid params: tasks/cancel requires an id"}
        r = await rpc(http, url, "GetTask", {"id": 5})
        assert r["error"] == {"code": -32602, "message": "Invalid params: GetTask requires an id"}


async def test_version_header_rules(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    async with serve(make_door(gate)) as url:
        r = await rpc(http, url, "SendMessage", msg10("x"), v1=False)
        assert r["error"] == {
            "code": -32009,
            "message": "method SendMessage is an A2A 1.0 method and needs the header A2A-Version: 1.0 (got none)",
        }
        r = await rpc(http, url, "GetTask", {"id": "t"}, headers={"A2A-Version": "0.3"}, v1=False)
        assert r["error"]["code"] == -32009 and "(got '0.3')" in r["error"]["message"]
        r = await rpc(http, url, "message/send", msg03("x"), headers={"A2A-Version": "2.0"})
        assert r["error"] == {
            "code": -32009,
            "message": "A2A version '2.0' is not supported; this agent speaks 1.0 and 0.3",
        }
        r = await rpc(http, url, "SendMessage", msg10("x"), headers={"A2A-Version": "1.1"}, v1=False)
        assert r["error"]["code"] == -32009
        for ok in ("1.0", "1.0.3"):
            r = await rpc(http, url, "SendMessage", msg10("x"), headers={"A2A-Version": ok})
            assert r["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        for ok in ("0.3", "0.3.0", ""):
            r = await rpc(http, url, "message/send", msg03("x"), headers={"a2a-version": ok})
            assert r["result"]["status"]["state"] == "submitted"
        # two version headers conflict
        async with http.post(
            url + "/",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}),
            headers=[("Content-Type", "application/json"), ("A2A-Version", "1.0"), ("A2A-Version", "0.3")],
        ) as resp:
            assert (await resp.json())["error"]["code"] == -32009


async def test_internal_error_hides_details(http: aiohttp.ClientSession) -> None:
    def broken(task_id: str) -> Any:
        raise RuntimeError("password=hunter2")

    door = Door(name="b", version="1", session_id=SESSION, runner=Gate())
    door.queue.record = broken  # type: ignore[method-assign]
    async with serve(door) as url:
        r = await rpc(http, url, "tasks/get", {"id": "x"}, rid=9)
        assert r == {"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "internal error"}}


@pytest.mark.parametrize("as_app", [False, True], ids=["handler", "app"])
async def test_http_routing(http: aiohttp.ClientSession, as_app: bool) -> None:
    async with serve(make_door(Gate(open_=True)), as_app=as_app) as url:
        for method, path in (
            ("GET", "/"),
            ("POST", "/other"),
            ("GET", "/x/y"),
            ("POST", "/.well-known/agent-card.json"),
            ("PUT", "/"),
        ):
            async with http.request(
                method, url + path, data=b"{}", headers={"Content-Type": "application/json"}
            ) as resp:
                assert resp.status == 404, (method, path)
                assert await resp.read() == b""
        big = b"x" * (1024**2 + 1)
        async with http.post(url + "/", data=big, headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 413
        async with http.post(url + "/", data=b"{}", headers={"Content-Type": "text/plain"}) as resp:
            assert resp.status == 404 and await resp.read() == b""
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
            async with http.get(url + path) as resp:
                assert resp.status == 200 and resp.content_type == "application/json"
                card = await resp.json()
                assert card["name"] == "echo"
            async with http.head(url + path) as resp:
                assert resp.status == 200 and await resp.read() == b""
        # curl sends Expect: 100-continue before a body over 1 KiB: the door says go on, then answers
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": msg03("x" * 2000)})
        headers = {"Content-Type": "application/json"}
        go_on = aiohttp.ClientTimeout(total=10)  # without a 100 Continue the client never sends its body
        async with http.post(url + "/", data=body, headers=headers, expect100=True, timeout=go_on) as resp:
            answer = await resp.json()
            assert resp.status == 200 and answer["result"]["kind"] == "task", answer
        async with http.post(url + "/", data=body, headers={**headers, "Expect": "tea"}) as resp:
            assert resp.status == 417


# --- lifecycle ----------------------------------------------------------------------------------


async def test_finished_tasks_are_bounded(http: aiohttp.ClientSession) -> None:
    gate = Gate(open_=True)
    door = make_door(gate, max_finished=3)
    async with serve(door) as url:
        ids = [(await rpc(http, url, "message/send", msg03(str(i))))["result"]["id"] for i in range(5)]
        await asyncio.wait_for(door.queue.wait_idle(), 5)
        assert door.get(ids[0]) is None and door.get(ids[1]) is None
        assert all(door.get(i) is not None for i in ids[2:])


async def test_submit_local_user_and_idle() -> None:
    gate = Gate(open_=True)
    door = make_door(gate, task_acceptance="none")
    assert door.queue.idle.is_set()
    task = door.submit("from task.md")
    assert not door.queue.idle.is_set()
    assert task.status.state is TaskState.SUBMITTED
    await asyncio.wait_for(door.queue.wait_idle(), 5)
    seen = gate.seen[0]
    assert seen.provenance == Provenance.local_user()
    assert (seen.lane, seen.dialect, seen.traceparent_from_caller) == (Lane.USER, None, None)
    got = door.get(task.id)
    assert got is not None and got.status.state is TaskState.COMPLETED
    await door.shutdown()


async def test_shutdown_cancels_running() -> None:
    gate = Gate()
    door = make_door(gate)
    task = door.submit("long")
    await asyncio.wait_for(gate.started.get(), 5)
    await door.shutdown()
    got = door.get(task.id)
    assert got is not None and got.status.state is TaskState.CANCELED
    assert gate.cancelled == [task.id]
    assert door.submit("late").status.state is TaskState.REJECTED
