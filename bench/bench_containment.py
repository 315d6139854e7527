"""Containment cost: launch latency and door task rate under ``advisory``, ``scoped`` and ``sealed``.

One daemon, one registry holding the same tiny script capsule three times, one per class. Launch
latency is ``POST /jobs`` → 201 (the host has probed, planned its grants, registered and printed
its ready line); the classes alternate launch by launch, so each sees the same machine state.
Door rate is tasks per second through a running session's door — ``message/send`` then
``tasks/get`` until terminal, one at a time — where every task runs the entrypoint under the
session's class (Landlock is applied between fork and exec; ``sealed`` adds bwrap and the
in-sandbox helper). Rounds alternate the classes too. Targets: ``scoped`` ≤ +5 ms p50 launch over
``advisory``; ``sealed`` ≤ +50 ms.

Run: python bench/bench_containment.py [--n 60] [--tasks 60]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import make_registry, start_daemon

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from a2a.client import A2AClient
from a2a.protocol.models import Message, Part
from roost.capsule.probe import probe_host

CLASSES = ("advisory", "scoped", "sealed")
ORDER = {"advisory": 0, "scoped": 1, "sealed": 2}
SCRIPT = """
import sys
print("ok:", sys.stdin.read().strip())
"""


def pct(xs: list[float], p: int) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[p - 1] if len(xs) > 1 else xs[0]


async def launch(http: aiohttp.ClientSession, url: str, name: str) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    async with http.post(url + "/jobs", json={"name": name, "version": "0.1.0"}) as resp:
        body = await resp.json()
        assert resp.status == 201, body
    return (time.perf_counter() - t0) * 1000, body


async def cancel(http: aiohttp.ClientSession, url: str, job_id: str) -> None:
    async with http.post(f"{url}/jobs/{job_id}/cancel") as resp:
        await resp.read()


async def one_task(client: A2AClient, door: str, i: int) -> None:
    msg = Message(message_id=f"m-{i}", role="user", parts=[Part(kind="text", text=f"task {i}")])
    sent = await client.send_message(door, msg)
    while True:
        task = await client.get_task(door, sent.id)
        if task.status.state.terminal:
            assert task.status.state.value == "completed", task.status
            return
        await asyncio.sleep(0.002)


async def main_async(n: int, tasks: int) -> None:
    offered = probe_host().offered
    classes = [c for c in CLASSES if ORDER[c] <= ORDER[offered]]
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        root = tmp / "registry"
        make_registry(
            root,
            {
                f"c-{c}": {
                    "script": SCRIPT,
                    "capabilities": {"containment": c, "filesystem": {"scope": "out"}},
                    "lifecycle": {"after_task": "sleep"},
                }
                for c in classes
            },
        )
        cfg = tmp / "roost.toml"
        allow = ", ".join(f'"c-{c}"' for c in classes)
        cfg.write_text(
            f'[roost]\nregistry_path = "{root}"\nstate_dir = "{tmp / "state"}"\nspawn_allow = [{allow}]\n'
            "max_live_capsules = 1000\nstop_grace_secs = 2.0\n"
        )
        daemon = start_daemon(["--config", str(cfg)])
        lat: dict[str, list[float]] = {c: [] for c in classes}
        rate: dict[str, list[float]] = {c: [] for c in classes}
        try:
            async with aiohttp.ClientSession() as http:
                for i in range(n + 3):
                    for c in classes if i % 2 == 0 else reversed(classes):
                        took, body = await launch(http, daemon.url, f"c-{c}")
                        await cancel(http, daemon.url, body["job_id"])
                        if i >= 3:  # warm-up
                            lat[c].append(took)
                sessions = {c: (await launch(http, daemon.url, f"c-{c}"))[1] for c in classes}
                async with A2AClient(total_timeout=30.0) as client:
                    per_round = 10
                    for r in range(max(1, tasks // per_round) + 1):
                        for c in classes if r % 2 == 0 else reversed(classes):
                            door = sessions[c]["capsule_url"]
                            t0 = time.perf_counter()
                            for k in range(per_round):
                                await one_task(client, door, r * 100 + k)
                            if r > 0:  # the first round warms up
                                rate[c].append(per_round / (time.perf_counter() - t0))
                for body in sessions.values():
                    await cancel(http, daemon.url, body["job_id"])
        finally:
            daemon.stop()
    base = statistics.median(lat["advisory"])
    print(f"containment cost on this host (offers '{offered}'), {n} launches per class, alternating")
    print("  class     launch p50 (ms)  p99 (ms)  +p50 vs advisory   door tasks/s (median)  ratio")
    base_rate = statistics.median(rate["advisory"])
    for c in classes:
        p50 = statistics.median(lat[c])
        rr = statistics.median(rate[c])
        print(f"  {c:9} {p50:14.2f} {pct(lat[c], 99):9.2f} {p50 - base:+15.2f}   {rr:20.1f}  {rr / base_rate:5.2f}")
    targets = {"scoped": 5.0, "sealed": 50.0}
    for c, limit in targets.items():
        if c in lat:
            over = statistics.median(lat[c]) - base
            print(f"  target {c} ≤ +{limit:g} ms p50: {'met' if over <= limit else 'NOT met'} ({over:+.2f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--tasks", type=int, default=60)
    args = ap.parse_args()
    asyncio.run(main_async(args.n, args.tasks))


if __name__ == "__main__":
    main()
