"""Trust follows the task: a send made while handling an untrusted task arrives untrusted.

A session registered ``trusted`` receives a message from an unknown local caller (unsealed, so
an untrusted ``event``: a prompt injection, say). Its entrypoint, as told, relays onward through
its host socket. Before, the daemon stamped the *session's* trust and the next door saw
``trusted``; now the host socket tells the daemon the running task's trust and the daemon
stamps the lower of the two — for a plain send and a streamed one alike. docs/security.md,
"Sealed origin and trust".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.capsules import Capsules, add_examples, base_env, capsules, trace_events, wait_for
from tests.support.registry import RegistryBuilder
from tests.test_relay_capsules import SENDER, STREAM_SENDER

__all__ = ["capsules"]

# Each reads a peer URL as its task and sends to it through its host socket (plain, streamed).
RELAYERS = {"plain": SENDER, "streamed": STREAM_SENDER}


async def _message(url: str, text: str) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "parts": [{"kind": "text", "text": text}],
                "messageId": "m-1",
            }
        },
    }
    async with aiohttp.ClientSession() as http, http.post(url + "/", json=body) as resp:
        return resp.status, await resp.json()


@pytest.mark.parametrize("how", sorted(RELAYERS))
async def test_a_send_from_an_untrusted_task_is_untrusted_at_the_next_door(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, how: str
) -> None:
    add_examples(registry, "echo")
    registry.add(
        "relayer",
        capabilities={"network": {"allow": ["127.0.0.1"]}},
        script=RELAYERS[how],
        extra={"lifecycle": {"after_task": "sleep"}},
    )
    d = await daemon_factory(registry.root, spawn_allow=("echo", "relayer"))
    env = base_env(MURMUR_ROOST_URL=d.url)
    recv = await capsules.start("echo@0.1.0", tmp_path / "recv", registry=registry.root, env=env)
    relay_wd = tmp_path / "relayer"
    relay_wd.mkdir()
    relayer = await capsules.start("relayer@0.1.0", relay_wd, registry=registry.root, env=env)
    rec = next(r for r in d.roost.table.sessions.values() if r.name == "relayer")
    assert rec.trust == "trusted"  # the session itself is trusted
    status, answer = await _message(relayer.url, recv.url)  # no seal: an untrusted event
    assert status == 200 and "error" not in answer, answer

    def received() -> list[dict[str, Any]]:
        return [r for r in trace_events(recv.trace) if r["event_type"] == "task_start"]

    await wait_for(lambda: received())
    start = received()[0]
    assert start["origin"] == "peer" and start["trust"] == "untrusted", start
    sends = [r for r in trace_events(relayer.trace) if r["event_type"] == "a2a_send"]
    assert sends and sends[0]["trust"] == "untrusted", sends
    relayed = [r for r in trace_events(relayer.trace) if r["event_type"] == "task_start"]
    assert relayed[0]["trust"] == "untrusted"
    assert json.loads(json.dumps(start))  # records stay JSON
    assert await recv.terminate() == 143
    assert await relayer.terminate() == 143
