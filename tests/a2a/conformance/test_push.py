"""Push notifications (A2A 1.0 §3.1.7–3.1.10, §4.3; 0.3 ``tasks/pushNotificationConfig/*``).

A real door with push delivery over the real HTTP pool, and real webhooks on loopback that
record what they are posted. The guard is a test double of the embedding application's egress
rule (roost's is tested in tests/unit/test_egress.py and tests/capsule/test_push_capsule.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from a2a.door import Door
from a2a.http1 import Http1Pool
from a2a.protocol.models import TaskState
from a2a.push import PushDelivery
from tests.a2a.conformance.harness import DIALECTS, SESSION, Caller, Script, serve
from tests.support.webserve import serve_app


class Hook:
    """A webhook: records each post (headers, JSON body); answers ``statuses`` in turn, then 200."""

    def __init__(self, statuses: list[int] | None = None, location: str | None = None) -> None:
        self.posts: list[tuple[dict[str, str], Any]] = []
        self.statuses = list(statuses or [])
        self.location = location
        self.url = ""
        self.arrived = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        self.posts.append((dict(request.headers), json.loads(await request.read())))
        self.arrived.set()
        status = self.statuses.pop(0) if self.statuses else 200
        headers = {"Location": self.location} if self.location and 300 <= status < 400 else None
        return web.Response(status=status, headers=headers)


@contextlib.asynccontextmanager
async def hook_server(hook: Hook) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    async with serve_app(app) as base:
        hook.url = base + "/hook"
        yield hook.url


FORBIDDEN = "http://127.0.0.1:1/"


def _guard(url: str) -> str | None:
    return f"network policy: '{url}' not in capabilities.network.allow" if url.startswith(FORBIDDEN) else None


@pytest.fixture
async def pool() -> AsyncIterator[Http1Pool]:
    p = Http1Pool(connect_timeout=2, total_timeout=5)
    yield p
    await p.close()


@pytest.fixture(params=DIALECTS, ids=lambda d: d.name)
async def caller(request: pytest.FixtureRequest, script: Script, pool: Http1Pool) -> AsyncIterator[Caller]:
    push = PushDelivery(pool, _guard, retry_delays=(0.05, 0.1))
    door = Door(name="pusher", version="1", session_id=SESSION, runner=script, push=push)
    async with serve(door) as url, aiohttp.ClientSession() as http:
        yield Caller(http, url, request.param)


def _config(caller: Caller, task_id: str, url: str, **extra: Any) -> dict[str, Any]:
    inner: dict[str, Any] = {"url": url, **extra}
    if caller.d.v1:
        return {"taskId": task_id, **inner}
    if "authentication" in inner:
        auth = inner.pop("authentication")
        inner["authentication"] = {"schemes": [auth["scheme"]], "credentials": auth["credentials"]}
    return {"taskId": task_id, "pushNotificationConfig": inner}


V1_METHODS = {
    "set": "CreateTaskPushNotificationConfig",
    "get": "GetTaskPushNotificationConfig",
    "list": "ListTaskPushNotificationConfigs",
    "delete": "DeleteTaskPushNotificationConfig",
}


def _method(caller: Caller, verb: str) -> str:
    if caller.d.v1:
        return V1_METHODS[verb]
    return f"tasks/pushNotificationConfig/{verb}"


async def _until(predicate: Any, within: float = 5.0) -> None:
    for _ in range(int(within / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_card_offers_push(caller: Caller) -> None:
    async with caller.http.get(caller.url + "/.well-known/agent-card.json") as resp:
        card = await resp.json()
    assert card["capabilities"]["pushNotifications"] is True
    assert _method(caller, "set") in card["capabilities"]["extensions"][0]["params"]["methods"]


async def test_config_methods_and_delivery(caller: Caller, script: Script) -> None:
    d = caller.d
    hook = Hook()
    async with hook_server(hook) as url:
        task = await caller.send("hold")
        tid = task["id"]
        auth = {"scheme": "Bearer", "credentials": "s3cret-cred"}
        r = await caller.call(
            _method(caller, "set"), _config(caller, tid, url, id="c1", token="tok-1", authentication=auth)
        )
        made = r["result"]
        assert made["taskId"] == tid
        inner = made if d.v1 else made["pushNotificationConfig"]
        assert inner["id"] == "c1" and inner["url"] == url and inner["token"] == "tok-1"
        assert "credentials" not in json.dumps(made)  # the secret is never shown back
        key = "taskId" if d.v1 else "id"
        got = (
            await caller.call(_method(caller, "get"), {key: tid, ("id" if d.v1 else "pushNotificationConfigId"): "c1"})
        )["result"]
        assert got == made
        listed = (await caller.call(_method(caller, "list"), {key: tid}))["result"]
        assert (listed["configs"] if d.v1 else listed) == [made]
        snake = {"task_id" if d.v1 else "id": tid}  # ProtoJSON readers take proto field names too
        assert (await caller.call(_method(caller, "list"), snake))["result"] == listed
        script.release.set()
        await _until(lambda: any(_state(caller, b) == d.state(TaskState.COMPLETED) for _, b in hook.posts))
        headers, _ = hook.posts[0]
        assert headers["X-A2A-Notification-Token"] == "tok-1"
        assert headers["Authorization"] == "Bearer s3cret-cred"
        if d.v1:
            kinds = [next(iter(b)) for _, b in hook.posts]
            assert set(kinds) <= {"statusUpdate", "artifactUpdate"} and "artifactUpdate" in kinds
        else:
            assert all(b["kind"] == "task" and b["id"] == tid for _, b in hook.posts)
        deleted = await caller.call(
            _method(caller, "delete"), {key: tid, ("id" if d.v1 else "pushNotificationConfigId"): "c1"}
        )
        assert deleted["result"] is None
        assert (await caller.call(_method(caller, "list"), {key: tid}))["result"] in (
            [],
            {"configs": [], "nextPageToken": ""},
        )
        err = await caller.error(
            _method(caller, "get"), {key: tid, ("id" if d.v1 else "pushNotificationConfigId"): "c1"}
        )
        assert err["code"] == -32001


def _state(caller: Caller, body: dict[str, Any]) -> str | None:
    if caller.d.v1:
        status = body.get("statusUpdate")
        return status["status"]["state"] if status else None
    state: str = body["status"]["state"]
    return state


async def test_config_in_the_send_is_kept_and_delivered(caller: Caller) -> None:
    hook = Hook()
    async with hook_server(hook) as url:
        params = caller.d.send_params("hello")
        key = "taskPushNotificationConfig" if caller.d.v1 else "pushNotificationConfig"
        params["configuration"][key] = {"url": url, "token": "t"}
        task = caller.d.task(await caller.ok("send", params))
        await _until(lambda: any(_state(caller, b) == caller.d.state(TaskState.COMPLETED) for _, b in hook.posts))
        listed = (await caller.call(_method(caller, "list"), {("taskId" if caller.d.v1 else "id"): task["id"]}))[
            "result"
        ]
        assert len(listed["configs"] if caller.d.v1 else listed) == 1


async def test_failed_posts_are_retried_with_backoff(caller: Caller) -> None:
    hook = Hook(statuses=[503, 503])
    async with hook_server(hook) as url:
        task = await caller.send("hold")
        await caller.call(_method(caller, "set"), _config(caller, task["id"], url))
        await caller.ok("cancel", {"id": task["id"]})
        await _until(lambda: len(hook.posts) >= 3)
        assert hook.statuses == []  # two refusals, then the third attempt was taken


async def test_redirects_are_never_followed(caller: Caller) -> None:
    target = Hook()
    async with hook_server(target) as target_url:
        hook = Hook(statuses=[307] * 10, location=target_url)
        async with hook_server(hook) as url:
            task = await caller.send("hold")
            await caller.call(_method(caller, "set"), _config(caller, task["id"], url))
            await caller.ok("cancel", {"id": task["id"]})
            await _until(lambda: len(hook.posts) >= 1)
            await asyncio.sleep(0.3)
            bodies = [json.dumps(b, sort_keys=True) for _, b in hook.posts]
            assert len(bodies) == len(set(bodies)) and target.posts == []  # each given up at once, never followed


async def test_refused_configs(caller: Caller) -> None:
    task = await caller.send("hold")
    tid = task["id"]
    err = await caller.error(_method(caller, "set"), _config(caller, tid, FORBIDDEN + "hook"))
    assert err["code"] == -32602 and "capabilities.network.allow" in err["message"]
    err = await caller.error(_method(caller, "set"), _config(caller, tid, "https://example.com/hook"))
    assert err["code"] == -32602 and "http://" in err["message"]
    err = await caller.error(_method(caller, "set"), _config(caller, "tsk_nobody", "http://127.0.0.1:9/h"))
    assert err["code"] == -32001
    for n in range(10):
        await caller.call(_method(caller, "set"), _config(caller, tid, f"http://127.0.0.1:9/h{n}", id=f"c{n}"))
    err = await caller.error(_method(caller, "set"), _config(caller, tid, "http://127.0.0.1:9/h11", id="c11"))
    assert err["code"] == -32602 and "10 push notification configs" in err["message"]


async def test_a_door_without_delivery_declares_none(script: Script) -> None:
    door = Door(name="plain", version="1", session_id=SESSION, runner=script)
    async with serve(door) as url, aiohttp.ClientSession() as http:
        caller = Caller(http, url, DIALECTS[0])
        assert (await caller.error("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "http://x/"}))[
            "code"
        ] == -32003
