"""Parallel duplicates at a real daemon: one winner, the documented refusal for the rest, exact state."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from roost.core.errors import IDENTITY_REFUSAL
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder


async def _register(d: RunningDaemon, sid: str, name: str, approval: str | None = None) -> tuple[int, Any]:
    headers = {"x-murmur-spawn-approval": approval} if approval else None
    status, body, _, _ = await d.call(
        "POST", "/register", json={"session_id": sid, "name": name, "version": "0.1.0"}, headers=headers
    )
    return status, body


async def test_parallel_top_level_registers_of_one_id(daemon: RunningDaemon) -> None:
    sid = f"ses_{os.urandom(8).hex()}"
    answers = await asyncio.gather(*(_register(daemon, sid, "orchestrator") for _ in range(20)))
    statuses = sorted(s for s, _ in answers)
    assert statuses == [200] + [403] * 19, answers
    assert all(body["error"] == IDENTITY_REFUSAL for s, body in answers if s == 403)
    credential = next(body["credential"] for s, body in answers if s == 200)
    # The winner's record survived its losers, and so did its credential.
    status, body, _, _ = await daemon.call("GET", f"/status/{sid}")
    assert status == 200 and body["status"] == "running", body
    assert body["live_capsules"] == 1
    assert daemon.roost.table.running == 1
    spawn_status, _ = await daemon.spawn(credential, "worker")
    assert spawn_status == 200
    # A later duplicate is the same refusal, not a server error.
    again, _ = await _register(daemon, sid, "orchestrator")
    assert again == 403
    rows = await daemon.roost.store.read(
        lambda c: c.execute("SELECT count(*) FROM sessions WHERE session_id = ?", (sid,)).fetchone()[0]
    )
    assert rows == 1


async def test_parallel_redeems_of_one_approval(daemon: RunningDaemon) -> None:
    _, cred = await daemon.register_top("orchestrator")
    status, grant = await daemon.spawn(cred, "worker")
    assert status == 200
    sids = [f"ses_{os.urandom(8).hex()}" for _ in range(20)]
    answers = await asyncio.gather(*(_register(daemon, sid, "worker", grant["approval"]) for sid in sids))
    ok = [sid for sid, (s, _) in zip(sids, answers, strict=True) if s == 200]
    assert len(ok) == 1, answers
    assert sorted(s for s, _ in answers) == [200] + [403] * 19
    assert daemon.roost.table.running == 2
    assert daemon.roost.table.live_capsules() == 2  # the slot went to the one child, no phantom


async def test_parallel_redeems_with_one_session_id(daemon: RunningDaemon) -> None:
    """Different approvals, the same new session id: one child; a refused duplicate spends nothing."""
    _, cred = await daemon.register_top("orchestrator")
    grants = []
    for _ in range(3):
        status, grant = await daemon.spawn(cred, "worker")
        assert status == 200
        grants.append(grant["approval"])
    sid = f"ses_{os.urandom(8).hex()}"
    answers = await asyncio.gather(*(_register(daemon, sid, "worker", a) for a in grants))
    assert sorted(s for s, _ in answers) == [200, 403, 403], answers
    assert daemon.roost.table.running == 2
    for (status, _), approval in zip(answers, grants, strict=True):
        s, body = await _register(daemon, f"ses_{os.urandom(8).hex()}", "worker", approval)
        if status == 200:
            assert s == 403 and "already been redeemed" in body["error"], body
        else:
            assert s == 200, body
    assert daemon.roost.table.running == 4


async def test_register_of_an_id_only_the_database_remembers(daemon: RunningDaemon, registry: RegistryBuilder) -> None:
    """An ended session retired from memory still blocks its id: 403, never a 500."""
    sid, cred = await daemon.register_top("orchestrator")
    status, _, _, _ = await daemon.call(
        "POST", "/deregister", json={"outcome": "complete"}, headers={"x-murmur-spawn-credential": cred}
    )
    assert status == 200
    rec = daemon.roost.table.get(sid)
    assert rec is not None
    del daemon.roost.table.sessions[sid]  # what retention does to an ended record
    answers = await asyncio.gather(*(_register(daemon, sid, "orchestrator") for _ in range(5)))
    assert sorted(s for s, _ in answers) == [403] * 5, answers
    assert daemon.roost.table.get(sid) is None
    assert daemon.roost.table.running == 0
