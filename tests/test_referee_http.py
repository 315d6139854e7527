"""The upstream-compatible referee over real HTTP: every endpoint, sentence and bound."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

from roost.core.errors import IDENTITY_REFUSAL
from roost.services.referee.service import refusals
from tests.support.daemon import FakeClock, RunningDaemon
from tests.support.registry import RegistryBuilder

CRED = "x-murmur-spawn-credential"
APPR = "x-murmur-spawn-approval"


async def test_health(daemon: RunningDaemon) -> None:
    status, body, resp, _ = await daemon.call("GET", "/health")
    assert status == 200 and body == {}
    assert resp.headers["content-type"].startswith("application/json")


async def test_unknown_route_and_method(daemon: RunningDaemon) -> None:
    status, body, _, _ = await daemon.call("GET", "/nope")
    assert (status, body) == (404, {"error": "not found"})
    status, body, _, _ = await daemon.call("GET", "/spawn")
    assert status == 405 and body == {"error": "method not allowed"}


async def test_top_level_register_requires_spawn_allow(daemon: RunningDaemon) -> None:
    status, body, _, _ = await daemon.call(
        "POST", "/register", json={"session_id": "ses_x", "name": "worker", "version": "0.1.0"}
    )
    assert status == 403
    assert body == {"error": "capsule 'worker' is not in --spawn-allow"}
    # Checked before the registry is read: an unpublished name gets the same sentence.
    status, body, _, _ = await daemon.call(
        "POST", "/register", json={"session_id": "ses_y", "name": "ghost", "version": "9.9.9"}
    )
    assert (status, body) == (403, {"error": "capsule 'ghost' is not in --spawn-allow"})
    sid, cred = await daemon.register_top("orchestrator", extra_key={"ignored": True})
    assert cred.startswith("msc1.") and cred.count(".") == 2
    status, body, _, _ = await daemon.call("GET", f"/status/{sid}")
    assert status == 200
    assert body == {"status": "running", "depth_remaining": 3, "live_children": 0, "live_capsules": 1}


async def test_register_bad_bodies(daemon: RunningDaemon) -> None:
    status, body, _, _ = await daemon.call("POST", "/register", data=b"{not json")
    assert status == 400 and body["error"].startswith("invalid JSON: ")
    status, body, _, _ = await daemon.call("POST", "/register", data=b"[1,2]")
    assert status == 400 and body["error"].startswith("invalid JSON: ")
    # Nesting deeper than the JSON parser follows is a 400, never a 500.
    status, body, _, _ = await daemon.call("POST", "/spawn", data=b"[" * 30_000 + b"]" * 30_000)
    assert (status, body) == (400, {"error": "invalid JSON: nested too deeply"})
    status, body, _, _ = await daemon.call(
        "POST", "/register", json={"session_id": "  ", "name": "orchestrator", "version": "0.1.0"}
    )
    assert (status, body) == (400, {"error": "session_id must not be empty"})
    status, body, _, _ = await daemon.call("POST", "/register", json={"session_id": "ses_1", "name": "orchestrator"})
    assert (status, body) == (400, {"error": "invalid JSON: missing field 'version'"})
    status, body, _, _ = await daemon.call("POST", "/register", data=b'{"pad": "' + b"x" * 70_000 + b'"}')
    assert (status, body) == (413, {"error": "request body too large: this daemon accepts at most 65536 bytes"})
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_1", "name": "orchestrator", "version": "0.1.0", "workdir": "relative/dir"},
    )
    assert (status, body) == (400, {"error": "workdir must be an absolute path"})


async def test_duplicate_session_id_is_identity_refusal(daemon: RunningDaemon) -> None:
    sid, _ = await daemon.register_top("orchestrator")
    status, body, _, _ = await daemon.call(
        "POST", "/register", json={"session_id": sid, "name": "orchestrator", "version": "0.1.0"}
    )
    assert (status, body) == (403, {"error": IDENTITY_REFUSAL})


async def test_unknown_artifact_is_registry_500(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator")
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator", "ghost"))
    status, body, _, _ = await d.call(
        "POST", "/register", json={"session_id": "ses_g", "name": "ghost", "version": "1.0.0"}
    )
    assert status == 500
    assert body["error"].startswith("registry error for 'ghost/1.0.0': ")


async def test_spawn_grant_and_child_register(daemon: RunningDaemon, registry: RegistryBuilder) -> None:
    parent, cred = await daemon.register_top("orchestrator")
    status, body = await daemon.spawn(cred, "worker")
    assert status == 200, body
    assert set(body) == {"approval", "name", "version", "sha256", "expires_at_ms"}
    assert body["name"] == "worker" and body["version"] == "0.1.0"
    assert body["sha256"] == registry.built["worker@0.1.0"]
    assert body["expires_at_ms"] == daemon.clock.now + 60_000
    assert body["approval"].startswith("msa1.")
    status, st, _, _ = await daemon.call("GET", f"/status/{parent}")
    assert st["live_children"] == 1 and st["live_capsules"] == 2
    child, child_cred = await daemon.register_child(body["approval"], "worker")
    status, st, _, _ = await daemon.call("GET", f"/status/{child}")
    assert st == {"status": "running", "depth_remaining": 2, "live_children": 0, "live_capsules": 2}
    # The child's own (empty) spawn allow list governs its spawns, not the global one.
    status, body = await daemon.spawn(child_cred, "orchestrator")
    assert (status, body) == (403, {"error": refusals.not_in_parent_allow("orchestrator")})


async def test_spawn_refusals(daemon: RunningDaemon) -> None:
    _, cred = await daemon.register_top("orchestrator")
    status, body = await daemon.spawn(cred, "echo")
    assert (status, body) == (403, {"error": "capsule 'echo' is not in parent's spawn_allow"})
    status, body = await daemon.spawn(cred, "greedy")
    assert status == 403
    assert body == {
        "error": "capabilities.network.allow: the child declares 'example.com', which its parent does not hold — "
        "a spawned capsule can never hold more capability than the capsule that spawned it"
    }
    status, body, _, _ = await daemon.call("POST", "/spawn", data=b"nope", headers={CRED: cred})
    assert status == 400 and body["error"].startswith("invalid JSON")
    # A refused spawn leaves no reservation.
    status, body, _, _ = await daemon.call("GET", "/status/" + next(iter(daemon.roost.table.sessions)))
    assert body["live_children"] == 0


async def test_identity_refusal_is_byte_identical(daemon: RunningDaemon) -> None:
    _, cred = await daemon.register_top("orchestrator")
    # A well-formed credential for a session that does not exist (forged payload, real tag).
    payload = base64.urlsafe_b64encode(b'{"v":1,"sid":"ses_nobody","n":"' + b"0" * 32 + b'"}').rstrip(b"=").decode()
    forged = f"msc1.{payload}.{cred.split('.')[2]}"
    _, ended_cred = await daemon.register_top("orchestrator")
    status, _, _, _ = await daemon.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: ended_cred})
    assert status == 200
    approval_status, grant = await daemon.spawn(cred, "worker")
    assert approval_status == 200
    variants: list[dict[str, str]] = [
        {},
        {CRED: "garbage"},
        {CRED: forged},
        {CRED: ended_cred},
        {CRED: grant["approval"]},  # wrong family
        {CRED: cred[:-2] + ("AA" if not cred.endswith("AA") else "BB")},
    ]
    seen: set[tuple[int, bytes, tuple[tuple[str, str], ...]]] = set()
    for headers in variants:
        status, _, resp, raw = await daemon.call(
            "POST", "/spawn", json={"name": "worker", "version": "0.1.0"}, headers=headers
        )
        hdrs = tuple(sorted((k.lower(), v) for k, v in resp.headers.items() if k.lower() != "date"))
        seen.add((status, raw, hdrs))
    assert len(seen) == 1, seen
    status, raw, hdrs = seen.pop()
    assert status == 403 and json.loads(raw) == {"error": IDENTITY_REFUSAL}


async def test_approval_replay_expiry_coordinates_digest(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}, "network": {"allow": ["localhost"]}})
    registry.add("worker", capabilities={"network": {"allow": ["localhost:8080"]}})
    daemon = await daemon_factory(registry.root, spawn_allow=("orchestrator",), registry_recheck_secs=0)
    _, cred = await daemon.register_top("orchestrator")
    _, grant = await daemon.spawn(cred, "worker")
    await daemon.register_child(grant["approval"], "worker")
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_again", "name": "worker", "version": "0.1.0"},
        headers={APPR: grant["approval"]},
    )
    assert (status, body) == (403, {"error": refusals.REPLAYED})

    _, grant = await daemon.spawn(cred, "worker")
    daemon.clock.advance(60_000)  # exp == now is expired
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_late", "name": "worker", "version": "0.1.0"},
        headers={APPR: grant["approval"]},
    )
    assert (status, body) == (403, {"error": refusals.EXPIRED})

    _, grant = await daemon.spawn(cred, "worker")
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_wrong", "name": "orchestrator", "version": "0.1.0"},
        headers={APPR: grant["approval"]},
    )
    assert (status, body) == (
        403,
        {"error": "this spawn approval was granted for 'worker@0.1.0', not 'orchestrator@0.1.0'"},
    )
    # Spent the moment it verified: the right coordinates are now a replay.
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_wrong2", "name": "worker", "version": "0.1.0"},
        headers={APPR: grant["approval"]},
    )
    assert (status, body) == (403, {"error": refusals.REPLAYED})

    _, grant = await daemon.spawn(cred, "worker")
    old = grant["sha256"]
    new = registry.add("worker", capabilities={"network": {"allow": ["localhost:8080"]}}, extra={"description": "v2"})
    assert new != old
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_bytes", "name": "worker", "version": "0.1.0"},
        headers={APPR: grant["approval"]},
    )
    assert status == 403
    assert body == {"error": refusals.digest("worker@0.1.0", old, new)}


async def test_depth_bound(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["orchestrator"]}})
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",), max_depth=1)
    _, cred = await d.register_top("orchestrator")
    status, grant = await d.spawn(cred, "orchestrator")
    assert status == 200
    _, child_cred = await d.register_child(grant["approval"], "orchestrator")
    status, body = await d.spawn(child_cred, "orchestrator")
    assert (status, body) == (403, {"error": refusals.depth(1)})
    d0 = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), max_depth=0, state_dir=d.config.state_dir.parent / "s0"
    )
    _, cred0 = await d0.register_top("orchestrator")
    status, body = await d0.spawn(cred0, "orchestrator")
    assert (status, body) == (403, {"error": refusals.depth(0)})


async def test_concurrency_bound_and_expiry_release(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    clock = FakeClock()
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",), max_concurrent=2, clock=clock)
    _, cred = await d.register_top("orchestrator")
    assert (await d.spawn(cred, "worker"))[0] == 200
    assert (await d.spawn(cred, "worker"))[0] == 200
    status, body = await d.spawn(cred, "worker")
    assert (status, body) == (403, {"error": refusals.concurrency(2, 2)})
    clock.advance(60_001)  # pending approvals expire and free their slots, no timer needed
    assert (await d.spawn(cred, "worker"))[0] == 200


async def test_expired_slots_are_swept_without_a_request(daemon_factory: Any, registry: RegistryBuilder) -> None:
    """After a burst of grants and then quiet, the next request must not pay for them all."""
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    clock = FakeClock()
    d = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), max_concurrent=50, max_live_capsules=50, clock=clock
    )
    _, cred = await d.register_top("orchestrator")
    for _ in range(20):
        assert (await d.spawn(cred, "worker"))[0] == 200
    assert len(d.roost.table.reservations) == 20
    clock.advance(60_001)
    for _ in range(60):  # the sweep runs every second; give it a few
        if not d.roost.table.reservations:
            break
        await asyncio.sleep(0.1)
    assert not d.roost.table.reservations and not d.roost.table.reservations_of
    status, body, _, _ = await d.call("GET", f"/status/{next(iter(d.roost.table.sessions))}")
    assert status == 200 and body["live_children"] == 0


async def test_machine_ceiling(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    # The per-user quota (three quarters of the ceiling by default) is lifted: this is the ceiling's test.
    d = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), max_live_capsules=2, uid_max_live_sessions=100
    )
    _, cred = await d.register_top("orchestrator")
    _, grant = await d.spawn(cred, "worker")
    status, body = await d.spawn(cred, "worker")
    assert (status, body) == (403, {"error": refusals.ceiling(2, 2)})
    # The ceiling never refuses a register, even a third top-level one.
    await d.register_child(grant["approval"], "worker")
    await d.register_top("orchestrator")
    d0 = await daemon_factory(
        registry.root,
        spawn_allow=("orchestrator",),
        max_live_capsules=0,
        state_dir=d.config.state_dir.parent / "z",
    )
    _, cred0 = await d0.register_top("orchestrator")
    assert (await d0.spawn(cred0, "worker")) == (403, {"error": refusals.ceiling(0, 1)})


async def test_concurrent_spawns_never_exceed_bounds(daemon_factory: Any, registry: RegistryBuilder) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",), max_concurrent=4, max_live_capsules=7)
    creds = [(await d.register_top("orchestrator"))[1] for _ in range(2)]
    results = await asyncio.gather(*(d.spawn(creds[i % 2], "worker") for i in range(60)))
    granted = [b for s, b in results if s == 200]
    refused = [b["error"] for s, b in results if s == 403]
    # 2 running + 5 pending = machine ceiling of 7; per-parent concurrency of 4 also holds.
    assert len(granted) == 5
    assert len(refused) == 55
    assert all(e.startswith(("machine capsule ceiling", "delegation concurrency")) for e in refused)
    per_parent = [len(v) for v in d.roost.table.reservations_of.values()]
    assert max(per_parent) <= 4


async def test_deregister(daemon: RunningDaemon) -> None:
    parent, cred = await daemon.register_top("orchestrator")
    _, grant = await daemon.spawn(cred, "worker")
    status, body, _, _ = await daemon.call("POST", "/deregister", json={"outcome": "done"}, headers={CRED: cred})
    assert (status, body) == (400, {"error": "outcome 'done' is not 'complete' or 'failed'"})
    status, body, _, _ = await daemon.call("POST", "/deregister", data=b"{", headers={CRED: cred})
    assert status == 400 and body["error"].startswith("invalid JSON")
    status, body, _, _ = await daemon.call("POST", "/deregister", json={"outcome": "failed"})
    assert (status, body) == (403, {"error": IDENTITY_REFUSAL})
    status, body, _, _ = await daemon.call("POST", "/deregister", json={"outcome": "failed"}, headers={CRED: cred})
    assert (status, body) == (200, {})
    status, body, _, _ = await daemon.call("GET", f"/status/{parent}")
    assert body["status"] == "failed" and body["live_children"] == 0
    # The credential now authorises nothing, and its pending approvals died with it.
    assert await daemon.spawn(cred, "worker") == (403, {"error": IDENTITY_REFUSAL})
    status, body, _, _ = await daemon.call(
        "POST",
        "/register",
        json={"session_id": "ses_orphan", "name": "worker", "version": "0.1.0"},
        headers={APPR: grant["approval"]},
    )
    assert (status, body) == (403, {"error": IDENTITY_REFUSAL})


async def test_status_unknown(daemon: RunningDaemon) -> None:
    status, body, _, _ = await daemon.call("GET", "/status/ses_nobody")
    assert (status, body) == (404, {"error": "session not found"})


async def test_restart_keeps_sessions_and_spent_ids(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    state = tmp_path / "persist"
    clock = FakeClock()
    d1 = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state, clock=clock)
    sid, cred = await d1.register_top("orchestrator")
    _, spent = await d1.spawn(cred, "worker")
    await d1.register_child(spent["approval"], "worker")
    _, pending = await d1.spawn(cred, "worker")
    await d1.roost.stop()
    await d1.http.close()
    d2 = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state, clock=clock)
    status, body, _, _ = await d2.call("GET", f"/status/{sid}")
    assert body == {"status": "running", "depth_remaining": 3, "live_children": 2, "live_capsules": 3}
    assert (await d2.spawn(cred, "worker"))[0] == 200  # the old credential still works
    status, body, _, _ = await d2.call(
        "POST",
        "/register",
        json={"session_id": "ses_replay", "name": "worker", "version": "0.1.0"},
        headers={APPR: spent["approval"]},
    )
    assert (status, body) == (403, {"error": refusals.REPLAYED})
    await d2.register_child(pending["approval"], "worker")  # a pending one survives too
    mode = (state / "master.key").stat().st_mode & 0o777
    assert mode == 0o600


async def test_restart_with_ephemeral_keys_forgets(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    state = tmp_path / "eph"
    d1 = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state, ephemeral_keys=True)
    sid, cred = await d1.register_top("orchestrator")
    await d1.roost.stop()
    await d1.http.close()
    d2 = await daemon_factory(registry.root, spawn_allow=("orchestrator",), state_dir=state, ephemeral_keys=True)
    assert await d2.spawn(cred, "worker") == (403, {"error": IDENTITY_REFUSAL})
    status, body, _, _ = await d2.call("GET", f"/status/{sid}")
    assert (status, body) == (404, {"error": "session not found"})
    assert not (state / "master.key").exists()


async def test_restart_replays_the_reservation_journal(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    """Pending slots come back; redeemed ones, a dead parent's and expired ones do not."""
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    state = tmp_path / "journal"
    clock = FakeClock()
    d1 = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), state_dir=state, clock=clock, max_concurrent=10
    )
    keep_sid, keep = await d1.register_top("orchestrator")
    gone_sid, gone = await d1.register_top("orchestrator")
    for _ in range(3):
        assert (await d1.spawn(keep, "worker"))[0] == 200
    _, redeemed = await d1.spawn(keep, "worker")
    await d1.register_child(redeemed["approval"], "worker")
    assert (await d1.spawn(gone, "worker"))[0] == 200
    status, _, _, _ = await d1.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: gone})
    assert status == 200
    clock.advance(30_000)
    _, late = await d1.spawn(keep, "worker")  # expires 30 s after the others
    await d1.roost.stop()
    await d1.http.close()

    d2 = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), state_dir=state, clock=clock, max_concurrent=10
    )
    _, body, _, _ = await d2.call("GET", f"/status/{keep_sid}")
    # 3 pending + 1 late pending + 1 running child; the ended parent's slot is not counted.
    assert body == {"status": "running", "depth_remaining": 3, "live_children": 5, "live_capsules": 6}
    _, body, _, _ = await d2.call("GET", f"/status/{gone_sid}")
    assert body["status"] == "complete" and body["live_children"] == 0
    await d2.roost.stop()
    await d2.http.close()

    clock.advance(45_000)  # the first three have expired; the late one has 15 s left
    d3 = await daemon_factory(
        registry.root, spawn_allow=("orchestrator",), state_dir=state, clock=clock, max_concurrent=10
    )
    _, body, _, _ = await d3.call("GET", f"/status/{keep_sid}")
    assert body["live_children"] == 2
    rows = d3.roost.store.rows("SELECT COUNT(*) AS n FROM reservation_log")
    assert rows[0]["n"] == 1  # expired batches were compacted at startup
    child, _ = await d3.register_child(late["approval"], "worker")
    _, body, _, _ = await d3.call("GET", f"/status/{child}")
    assert body["status"] == "running"


async def test_a_grant_survives_kill_9_once_written_behind(
    registry: RegistryBuilder, tmp_path: Path, daemon_processes: list[Any]
) -> None:
    from tests.support.daemon import start_daemon_process

    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    args = ["--registry-path", str(registry.root), "--state-dir", str(tmp_path / "st"), "--spawn-allow", "orchestrator"]
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, start_daemon_process, args)
    daemon_processes.append(first)
    import aiohttp

    async with aiohttp.ClientSession() as http:
        reg = {"session_id": "ses_k9", "name": "orchestrator", "version": "0.1.0"}
        async with http.post(first.url + "/register", json=reg) as resp:
            cred = (await resp.json())["credential"]
        for _ in range(2):
            async with http.post(
                first.url + "/spawn", json={"name": "worker", "version": "0.1.0"}, headers={CRED: cred}
            ) as resp:
                assert resp.status == 200
        await asyncio.sleep(0.5)  # well past the 20 ms write-behind window
        first.proc.kill()
        first.proc.wait()
        second = await loop.run_in_executor(None, start_daemon_process, args)
        daemon_processes.append(second)
        async with http.get(second.url + "/status/ses_k9") as resp:
            body = await resp.json()
    assert body["live_children"] == 2


async def test_a_lapsed_resolution_is_revalidated_once_for_a_burst(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",), max_concurrent=100, max_live_capsules=100)
    _, cred = await d.register_top("orchestrator")
    assert (await d.spawn(cred, "worker"))[0] == 200
    d.roost.referee.forget_resolved()
    before = d.registry.cache_info()
    results = await asyncio.gather(*(d.spawn(cred, "worker") for _ in range(40)))
    assert [status for status, _ in results] == [200] * 40
    after = d.registry.cache_info()
    assert (after.hits + after.misses) - (before.hits + before.misses) == 1
    # Forgetting again mid-flight: the old flight answers its waiters but caches nothing.
    ref = d.roost.referee
    ref.forget_resolved()
    first = asyncio.ensure_future(ref.resolve("worker", "0.1.0"))
    await asyncio.sleep(0)
    assert ("worker", "0.1.0") in ref.artifacts.resolving
    ref.forget_resolved()
    assert (await first).name == "worker"
    assert ("worker", "0.1.0") not in ref.artifacts.resolved
    assert (await d.spawn(cred, "worker"))[0] == 200
    assert ("worker", "0.1.0") in d.roost.referee.artifacts.resolved


async def test_a_resolution_past_half_its_window_is_refreshed_ahead(
    daemon_factory: Any, registry: RegistryBuilder
) -> None:
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    d = await daemon_factory(registry.root, spawn_allow=("orchestrator",), registry_recheck_secs=0.4)
    _, cred = await d.register_top("orchestrator")
    assert (await d.spawn(cred, "worker"))[0] == 200
    ref = d.roost.referee
    checked = ref.artifacts.resolved[("worker", "0.1.0")][1]
    reads = d.registry.cache_info()
    await asyncio.sleep(0.25)  # past half the window, still inside it
    assert (await d.spawn(cred, "worker"))[0] == 200  # answered from the cache...
    for _ in range(100):  # ...while one revalidation runs behind it
        if ref.artifacts.resolved[("worker", "0.1.0")][1] > checked:
            break
        await asyncio.sleep(0.01)
    assert ref.artifacts.resolved[("worker", "0.1.0")][1] > checked
    after = d.registry.cache_info()
    assert (after.hits + after.misses) - (reads.hits + reads.misses) == 1
