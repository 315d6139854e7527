"""A2A 1.0 §3.3.4: what the card declares unsupported answers its own error, never -32601.

A door without push delivery (the library default) declares push notifications false; the
capsule host's door has it (tests/a2a/conformance/test_push.py). Streaming is always served."""

from __future__ import annotations

import aiohttp
import pytest

from a2a.door import Door
from tests.a2a.conformance.harness import SESSION, Caller, Dialect, Script, serve

V1 = {
    "GetExtendedAgentCard": -32004,
    "CreateTaskPushNotificationConfig": -32003,
    "SetTaskPushNotificationConfig": -32003,
    "GetTaskPushNotificationConfig": -32003,
    "ListTaskPushNotificationConfig": -32003,
    "ListTaskPushNotificationConfigs": -32003,
    "DeleteTaskPushNotificationConfig": -32003,
}
V03 = {
    "agent/getAuthenticatedExtendedCard": -32007,  # the 0.3 AuthenticatedExtendedCardNotConfiguredError
    "tasks/pushNotificationConfig/set": -32003,
    "tasks/pushNotificationConfig/get": -32003,
    "tasks/pushNotificationConfig/list": -32003,
    "tasks/pushNotificationConfig/delete": -32003,
}


async def test_card_declares_them_false(caller: Caller) -> None:
    async with caller.http.get(caller.url + "/.well-known/agent-card.json") as resp:
        card = await resp.json()
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["pushNotifications"] is False
    assert card["capabilities"]["extendedAgentCard"] is False


async def test_unsupported_operations(caller: Caller) -> None:
    table = V1 if caller.d.v1 else V03
    for method, code in table.items():
        err = await caller.error(method, {"id": "tsk_x", "message": caller.d.message("x")})
        assert err["code"] == code, method
        assert err["message"], method


@pytest.mark.parametrize("field", ["pushNotificationConfig", "taskPushNotificationConfig"])
async def test_send_with_push_config_is_refused(caller: Caller, field: str) -> None:
    params = caller.d.send_params("x")
    params["configuration"][field] = {"url": "http://127.0.0.1:9/hook"}
    err = await caller.error("send", params)
    assert err["code"] == -32003


async def test_unknown_method_is_still_not_found(caller: Caller) -> None:
    err = await caller.error("tasks/frobnicate" if not caller.d.v1 else "FrobnicateTask", {})
    assert err == {"code": -32601, "message": "Method not found"}


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
async def test_a_door_that_takes_no_tasks_answers_unsupported(script: Script, dialect: str) -> None:
    """``task_acceptance: none``: the card lists no send method, and a send is -32004, not -32601."""
    door = Door(name="closed", version="1", session_id=SESSION, runner=script, task_acceptance="none")
    async with serve(door) as url, aiohttp.ClientSession() as http:
        caller = Caller(http, url, Dialect(dialect))
        err = await caller.error("send", caller.d.send_params("x"))
        assert err["code"] == -32004 and "task_acceptance: none" in err["message"], err
        continued = await caller.error("send", caller.d.send_params("x", taskId="tsk_x"))
        assert continued["code"] == -32004
        assert (await caller.error("get", {"id": "tsk_x"}))["code"] == -32001  # the rest is still served
    assert script.seen == []
