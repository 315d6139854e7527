"""End to end: two ``roost-capsule`` sessions share and fetch a file through the daemon.

Session A's entrypoint runs ``roost-capsule share`` and session B's runs ``roost-capsule fetch``
over ``MURMUR_HOST_SOCKET``: neither entrypoint sees a credential, the host adds it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from a2a.client import A2AClient
from a2a.protocol.models import Message, Part, TaskState
from tests.support.capsules import Capsules, base_env, capsules
from tests.support.registry import RegistryBuilder

__all__ = ["capsules"]  # the fixture, re-exported for this module

SCRIPT = """
import json, subprocess, sys
req = json.loads(sys.stdin.read())
r = subprocess.run([sys.executable, "-m", "roost.capsule", *req], capture_output=True, text=True)
print(json.dumps({"rc": r.returncode, "out": r.stdout, "err": r.stderr}))
"""

CAPS = {"network": {"allow": ["127.0.0.1"]}, "peer_fetch": {"allow": ["127.0.0.1"]}}


async def _run(client: A2AClient, url: str, argv: list[str]) -> dict[str, Any]:
    msg = Message(message_id=f"m-{argv[0]}", role="user", parts=[Part(kind="text", text=json.dumps(argv))])
    sent = await client.send_message(url, msg)
    for _ in range(400):
        task = await client.get_task(url, sent.id)
        if task.status.state in (TaskState.COMPLETED, TaskState.FAILED):
            text = task.artifacts[0].parts[0].text if task.artifacts else ""
            return dict(json.loads(text or "{}"))
        await asyncio.sleep(0.05)
    raise AssertionError("task did not finish")


async def test_share_and_fetch_between_capsule_sessions(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add(
        "peerbox",
        capabilities=CAPS,
        script=SCRIPT,
        extra={"exports": {"peer_files": {"root": "share", "max_ttl": 900}}, "lifecycle": {"after_task": "sleep"}},
    )
    d = await daemon_factory(registry.root, spawn_allow=("peerbox",))
    env = base_env(MURMUR_ROOST_URL=d.url)
    wa, wb = tmp_path / "a", tmp_path / "b"
    (wa / "share").mkdir(parents=True)
    (wa / "share" / "notes.md").write_bytes(b"shared through the daemon\n")
    a = await capsules.start("peerbox@0.1.0", wa, registry=registry.root, env=env)
    b = await capsules.start("peerbox@0.1.0", wb, registry=registry.root, env=env)
    async with A2AClient() as client:
        shared = await _run(client, a.url, ["share", "notes.md", "--peer", b.url])
        assert shared["rc"] == 0, shared
        minted = json.loads(shared["out"])
        assert minted["audience"] == f"peerbox@{b.url.removeprefix('http://')}"
        fetched = await _run(client, b.url, ["fetch", "--peer", d.url, minted["handle"]])
        assert fetched["rc"] == 0, fetched
        stored = json.loads(fetched["out"])
    assert stored["stored_path"] == f"peer-in/{minted['handle_id']}-notes.md"
    assert (wb / stored["stored_path"]).read_bytes() == b"shared through the daemon\n"
    assert "mh1." not in a.trace.read_text() and "mh1." not in b.trace.read_text()
    kinds_a = [json.loads(x)["event_type"] for x in a.trace.read_text().splitlines()]
    kinds_b = [json.loads(x)["event_type"] for x in b.trace.read_text().splitlines()]
    assert "peer_handle_mint" in kinds_a and "peer_handle_redeem" in kinds_a
    assert "peer_file_fetch" in kinds_b
    await a.terminate()
    await b.terminate()
