"""A2A 1.0 §3.1.4 ListTasks (and 0.3 ``tasks/list``): filters, paging, history, artifacts, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from a2a.door import Door
from a2a.protocol.models import TaskState
from tests.a2a.conformance.harness import SESSION, Caller, Dialect, Script, serve


async def _fill(c: Caller, n: int, *, context: str | None = None, text: str = "x") -> list[str]:
    extra = {"contextId": context} if context else {}
    ids = []
    for i in range(n):
        task = await c.send(f"{text}{i}", immediate=False, **extra)
        ids.append(task["id"])
    return ids


async def test_lists_newest_first_with_totals(caller: Caller) -> None:
    ids = await _fill(caller, 3)
    page = await caller.ok("list", {})
    assert [t["id"] for t in page["tasks"]] == ids[::-1]
    assert page["totalSize"] == 3 and page["nextPageToken"] == "" and page["pageSize"] == 50
    assert all("artifacts" not in t for t in page["tasks"])  # omitted unless asked for
    with_artifacts = await caller.ok("list", {"includeArtifacts": True})
    assert with_artifacts["tasks"][0]["artifacts"][0]["parts"][0]["text"] == "echo: x2"


async def test_paging_walks_every_task_once(caller: Caller) -> None:
    ids = await _fill(caller, 7)
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await caller.ok("list", {"pageSize": 3, "pageToken": token} if token else {"pageSize": 3})
        assert page["totalSize"] == 7 and page["pageSize"] == 3
        seen += [t["id"] for t in page["tasks"]]
        pages += 1
        token = page["nextPageToken"]
        if not token:
            break
    assert pages == 3 and seen == ids[::-1]


async def test_filters(caller: Caller) -> None:
    a = await _fill(caller, 2, context="ctx-a")
    b = await _fill(caller, 1, context="ctx-b", text="fail")
    only_a = await caller.ok("list", {"contextId": "ctx-a"})
    assert {t["id"] for t in only_a["tasks"]} == set(a) and only_a["totalSize"] == 2
    failed = caller.d.state(TaskState.FAILED)
    by_state = await caller.ok("list", {"status": failed})
    assert [t["id"] for t in by_state["tasks"]] == b
    assert all(t["status"]["state"] == failed for t in by_state["tasks"])
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert (await caller.ok("list", {"statusTimestampAfter": future}))["totalSize"] == 0
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert (await caller.ok("list", {"statusTimestampAfter": past}))["totalSize"] == 3


async def test_history_length(caller: Caller) -> None:
    await _fill(caller, 1)
    full = (await caller.ok("list", {}))["tasks"][0]
    assert [len(full["history"])] == [2]  # the user's message and the agent's answer
    none = (await caller.ok("list", {"historyLength": 0}))["tasks"][0]
    assert "history" not in none or none["history"] == []
    last = (await caller.ok("list", {"historyLength": 1}))["tasks"][0]["history"]
    assert len(last) == 1 and last[0]["role"] == ("ROLE_AGENT" if caller.d.v1 else "agent")


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"pageToken": "not-a-token"}, "pageToken"),
        ({"pageToken": "djE6eHx5"}, "pageToken"),  # base64 of "v1:x|y": right prefix, bad cursor
        ({"status": "TASK_STATE_BOGUS"}, "status"),
        ({"status": 7}, "status"),
        ({"pageSize": -1}, "pageSize"),
        ({"pageSize": "ten"}, "pageSize"),
        ({"historyLength": -2}, "historyLength"),
        ({"statusTimestampAfter": "yesterday"}, "statusTimestampAfter"),
        ({"statusTimestampAfter": "2026-01-01T00:00:00"}, "statusTimestampAfter"),
        ({"includeArtifacts": "yes"}, "includeArtifacts"),
        ({"contextId": 3}, "contextId"),
    ],
)
async def test_bad_fields_are_invalid_params(caller: Caller, params: dict[str, object], needle: str) -> None:
    err = await caller.error("list", params)
    assert err["code"] == -32602 and needle in err["message"]


@pytest.mark.parametrize("size", [0, 101, 150, 10_000])
async def test_page_size_out_of_bounds_is_invalid_params(caller: Caller, size: int) -> None:
    # A2A 1.0 ListTasksRequest.page_size: "The minimum value is 1. The maximum value is 100".
    err = await caller.error("list", {"pageSize": size})
    assert err["code"] == -32602 and f"pageSize must be between 1 and 100 (got {size})" in err["message"]


async def test_page_size_bounds_are_served(caller: Caller) -> None:
    await _fill(caller, 2)
    for size in (1, 100):
        page = await caller.ok("list", {"pageSize": size})
        assert page["pageSize"] == size and len(page["tasks"]) == min(size, 2)


async def test_unrecognized_status_is_no_filter(caller: Caller) -> None:
    await _fill(caller, 2)  # the official JS SDK's listTasks({}) sends its protobuf default
    page = await caller.ok("list", {"status": "UNRECOGNIZED"})
    assert page["totalSize"] == 2


async def test_list_method_needs_matching_version() -> None:
    door = Door(name="lister", version="1", session_id=SESSION, runner=Script())
    async with serve(door) as url, aiohttp.ClientSession() as http:
        c = Caller(http, url, Dialect("0.3"))
        r = await c.call("ListTasks", {})
        assert r["error"]["code"] == -32009
