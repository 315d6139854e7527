"""The daemon's ``door_blocking_cap_secs`` reaches the doors of the script capsules it launches: a
blocking send to a launched session's door is answered with the task as it stands at that cap,
not at the door's built-in default."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from a2a.door import DEFAULT_BLOCKING_CAP_SECS
from roost.backends.process.spawn import capsule_host_env
from roost.core.wire import BLOCKING_CAP_ENV
from roost.state.config import Config
from tests.support.launcher import job_final
from tests.support.registry import RegistryBuilder

HOLDER = """
import os, sys, time
text = sys.stdin.read().strip()
while text == "hold" and not os.path.exists("release"):
    time.sleep(0.05)
print("done: " + text)
"""


async def _rpc(http: aiohttp.ClientSession, door: str, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}
    # Far above the configured cap and far below the door's default: a door that ignored the
    # daemon's setting would hold this call until the client gives up.
    timeout = aiohttp.ClientTimeout(total=60)
    async with http.post(door + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=timeout) as resp:
        answer = await resp.json()
    assert "result" in answer, answer
    return answer["result"]


async def test_a_launched_sessions_door_answers_at_the_configured_cap(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("holder", script=HOLDER, extra={"lifecycle": {"after_task": "sleep"}})
    d = await daemon_factory(registry.root, spawn_allow=("holder",), door_blocking_cap_secs=0.5, stop_grace_secs=1.0)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "holder", "version": "0.1.0", "task": "warm"})
    assert status == 201, job
    door, workdir = job["capsule_url"], Path(job["workdir"])
    message = {"messageId": "m-hold", "role": "ROLE_USER", "parts": [{"text": "hold"}]}
    sent = (await _rpc(d.http, door, "SendMessage", {"message": message}))["task"]  # blocking: no returnImmediately
    assert sent["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), sent
    await asyncio.to_thread((workdir / "release").write_text, "")
    for _ in range(400):
        got = await _rpc(d.http, door, "GetTask", {"id": sent["id"]})
        if got["status"]["state"] == "TASK_STATE_COMPLETED":
            break
        await asyncio.sleep(0.05)
    assert got["status"]["state"] == "TASK_STATE_COMPLETED", got
    assert got["artifacts"][0]["parts"][0]["text"] == "done: hold\n"
    status, _, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel")
    assert status == 200
    await job_final(d, job["job_id"], {}, timeout=30)


def test_the_cap_is_in_every_capsule_hosts_environment() -> None:
    assert Config().door_blocking_cap_secs == DEFAULT_BLOCKING_CAP_SECS
    assert capsule_host_env(Config())[BLOCKING_CAP_ENV] == "120.0"
    assert capsule_host_env(Config(door_blocking_cap_secs=2.5))[BLOCKING_CAP_ENV] == "2.5"
