"""A real door on an ephemeral loopback port and a raw JSON-RPC caller speaking either dialect.

Every conformance module drives the door over HTTP exactly as a peer would; the runner is a test
double of the capsule (an interface, not one of our components) that the test scripts.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from a2a.door import DoorTask, TaskOutcome
from a2a.protocol.models import TaskState
from tests.support.doorserve import serve_door

SESSION = "ses_0123456789abcdef0123456789abcdef"


class Script:
    """A runner whose answers the test chooses per task text.

    ``ask:<question>`` → input-required with that question; ``auth:<what>`` → auth-required;
    ``hold`` → waits for ``release``; ``fail`` → failed; anything else completes with ``echo: <text>``.
    """

    def __init__(self) -> None:
        self.seen: list[DoorTask] = []
        self.release = asyncio.Event()
        self.started = asyncio.Queue[DoorTask]()

    async def __call__(self, task: DoorTask) -> TaskOutcome:
        self.seen.append(task)
        await self.started.put(task)
        text = task.text
        if text.startswith("ask:"):
            return TaskOutcome.input_required(text[4:])
        if text.startswith("auth:"):
            return TaskOutcome.auth_required(text[5:])
        if text == "hold":
            await self.release.wait()
        if text.startswith("fail"):
            return TaskOutcome.failed("it failed")
        return TaskOutcome.completed(f"echo: {text}")


serve = serve_door  # as the capsule host serves it


@dataclass(frozen=True)
class Dialect:
    """One wire dialect: its method names, version header and shapes."""

    name: str

    @property
    def v1(self) -> bool:
        return self.name == "1.0"

    def method(self, op: str) -> str:
        names = {
            "send": ("SendMessage", "message/send"),
            "get": ("GetTask", "tasks/get"),
            "list": ("ListTasks", "tasks/list"),
            "cancel": ("CancelTask", "tasks/cancel"),
            "stream": ("SendStreamingMessage", "message/stream"),
            "subscribe": ("SubscribeToTask", "tasks/resubscribe"),
        }
        return names[op][0 if self.v1 else 1]

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "A2A-Version": self.name}

    def state(self, state: TaskState) -> str:
        return state.v1 if self.v1 else state.value

    def part(self, text: str) -> dict[str, Any]:
        return {"text": text} if self.v1 else {"kind": "text", "text": text}

    def message(self, text: str, *, message_id: str | None = None, **extra: Any) -> dict[str, Any]:
        """A fresh message id unless one is given: the door answers a message id it has seen
        with that message's task (a retry), as a real client's unique ids never do by accident."""
        msg: dict[str, Any] = {
            "messageId": f"msg-{uuid.uuid4()}" if message_id is None else message_id,
            "role": "ROLE_USER" if self.v1 else "user",
            "parts": [self.part(text)],
            **extra,
        }
        if not self.v1:
            msg["kind"] = "message"
        return msg

    def send_params(self, text: str, *, immediate: bool | None = True, **extra: Any) -> dict[str, Any]:
        history = extra.pop("history_length", None)
        params: dict[str, Any] = {"message": self.message(text, **extra)}
        config: dict[str, Any] = {}
        if immediate is not None:
            config["returnImmediately" if self.v1 else "blocking"] = immediate if self.v1 else not immediate
        if history is not None:
            config["historyLength"] = history
        if config:
            params["configuration"] = config
        return params

    def task(self, result: dict[str, Any]) -> dict[str, Any]:
        """The Task of a send result (1.0 wraps it in ``{"task"}``)."""
        if self.v1:
            assert set(result) == {"task"}, result
            inner: dict[str, Any] = result["task"]
            return inner
        assert result["kind"] == "task", result
        return result


DIALECTS = [Dialect("1.0"), Dialect("0.3")]


class Caller:
    """Raw JSON-RPC over one aiohttp session (one connection pool, like a real peer)."""

    def __init__(self, http: aiohttp.ClientSession, url: str, dialect: Dialect) -> None:
        self.http = http
        self.url = url
        self.d = dialect

    async def call(
        self, method: str, params: Any = None, *, headers: dict[str, str] | None = None, rid: Any = "r1"
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        async with self.http.post(
            self.url + "/", data=json.dumps(body), headers={**self.d.headers(), **(headers or {})}
        ) as resp:
            assert resp.status == 200, resp.status
            out: dict[str, Any] = json.loads(await resp.read())
            return out

    async def ok(self, op: str, params: Any = None, **kw: Any) -> dict[str, Any]:
        r = await self.call(self.d.method(op), params, **kw)
        assert "result" in r, r
        result: dict[str, Any] = r["result"]
        return result

    async def error(self, op: str, params: Any = None, **kw: Any) -> dict[str, Any]:
        method = self.d.method(op) if op in ("send", "get", "list", "cancel", "stream", "subscribe") else op
        r = await self.call(method, params, **kw)
        assert "error" in r, r
        assert set(r["error"]) <= {"code", "message", "data"}
        err: dict[str, Any] = r["error"]
        return err

    async def send(self, text: str, **kw: Any) -> dict[str, Any]:
        return self.d.task(await self.ok("send", self.d.send_params(text, **kw)))

    async def get(self, task_id: str, **params: Any) -> dict[str, Any]:
        return await self.ok("get", {"id": task_id, **params})

    async def wait(self, task_id: str, state: TaskState) -> dict[str, Any]:
        want = self.d.state(state)
        for _ in range(500):
            task = await self.get(task_id)
            if task["status"]["state"] == want:
                return task
            await asyncio.sleep(0.01)
        raise AssertionError(f"task {task_id} never reached {want}: {task}")

    async def stream(self, op: str, params: Any, *, rid: Any = "s1") -> AsyncIterator[dict[str, Any]]:
        """Each ``result`` of a streaming method's SSE answer, as it arrives (asserts the framing:
        ``text/event-stream``, JSON-RPC responses with this request's id, comments skipped)."""
        body = {"jsonrpc": "2.0", "id": rid, "method": self.d.method(op), "params": params}
        async with self.http.post(self.url + "/", data=json.dumps(body), headers=self.d.headers()) as resp:
            assert resp.status == 200, resp.status
            assert resp.headers["Content-Type"].startswith("text/event-stream"), resp.headers
            async for line in resp.content:
                text = line.decode().rstrip("\r\n")
                if not text.startswith("data:"):
                    continue
                item = json.loads(text[5:])
                assert item["jsonrpc"] == "2.0" and item["id"] == rid and "result" in item, item
                yield item["result"]

    def kind(self, item: dict[str, Any]) -> str:
        """``task``, ``status`` or ``artifact``: which stream item this is (checked per dialect)."""
        if self.d.v1:
            (key,) = item.keys()
            return {"task": "task", "statusUpdate": "status", "artifactUpdate": "artifact"}[key]
        return {"task": "task", "status-update": "status", "artifact-update": "artifact"}[item["kind"]]

    def body(self, item: dict[str, Any]) -> dict[str, Any]:
        """The item without its 1.0 wrapper."""
        if self.d.v1:
            (inner,) = item.values()
            out: dict[str, Any] = inner
            return out
        return item
