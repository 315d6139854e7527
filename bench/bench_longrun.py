"""Long run: RSS and database size every 10 s over a sustained register → spawn → redeem → deregister cycle.

A daemon with a compressed retention (``--retention SECS``: ended sessions and finished jobs
leave the database after SECS, memory after SECS/2, swept every SECS/5) takes the cycle from
``--clients`` concurrent loops for ``--seconds``. Each cycle registers a top-level session,
spawns, redeems the approval as a child session, deregisters both. Samples of the daemon's RSS
and of roost.db and its WAL are printed every 10 s. Target: flat after the first retention
window: once three retention periods have passed, the steady samples are cut in two halves and
each half's median compared (same run); the WAL swings between checkpoints up to
``journal_size_limit``, so a single sample against another says little.

Run: python bench/bench_longrun.py [--seconds 120] [--retention 20] [--clients 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import make_registry, start_daemon

SAMPLE_SECS = 10.0


async def cycle(http: aiohttp.ClientSession, url: str) -> None:
    sid = f"ses_{os.urandom(8).hex()}"
    async with http.post(url + "/register", json={"session_id": sid, "name": "orchestrator", "version": "0.1.0"}) as r:
        cred = (await r.json())["credential"]
    head = {"x-murmur-spawn-credential": cred}
    async with http.post(url + "/spawn", json={"name": "worker", "version": "0.1.0"}, headers=head) as r:
        approval = (await r.json())["approval"]
    kid = f"ses_{os.urandom(8).hex()}"
    async with http.post(
        url + "/register",
        json={"session_id": kid, "name": "worker", "version": "0.1.0"},
        headers={"x-murmur-spawn-approval": approval},
    ) as r:
        kid_cred = (await r.json())["credential"]
    for c in (kid_cred, cred):
        async with http.post(
            url + "/deregister", json={"outcome": "complete"}, headers={"x-murmur-spawn-credential": c}
        ) as r:
            assert r.status == 200, await r.text()


def file_bytes(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


async def run(seconds: float, retention: float, clients: int) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        registry = tmp / "registry"
        registry.mkdir()
        make_registry(registry, {"orchestrator": {"capabilities": {"spawn": {"allow": ["worker"]}}}, "worker": {}})
        state = tmp / "state"
        cfg = tmp / "roost.toml"
        cfg.write_text(
            f'registry_path = "{registry}"\nspawn_allow = ["orchestrator"]\nstate_dir = "{state}"\n'
            f"retention_secs = {retention}\nsession_memory_secs = {retention / 2}\n"
            f"retention_sweep_secs = {max(0.5, retention / 5)}\nmax_live_capsules = 1000\n"
            # One uid drives every cycle here, far past a per-user flood guard's default.
            "uid_registrations_per_minute = 0\n"
        )
        daemon = start_daemon(["--config", str(cfg)])
        proc = psutil.Process(daemon.proc.pid)
        done = 0
        stop = time.monotonic() + seconds
        samples: list[tuple[float, int, float, float, float]] = []
        try:
            async with aiohttp.ClientSession() as http:

                async def loop() -> None:
                    nonlocal done
                    while time.monotonic() < stop:
                        await cycle(http, daemon.url)
                        done += 1

                async def sample() -> None:
                    t0 = time.monotonic()
                    while time.monotonic() < stop:
                        await asyncio.sleep(SAMPLE_SECS)
                        t = time.monotonic() - t0
                        rss = proc.memory_info().rss / 2**20
                        db = file_bytes(state / "roost.db") / 2**20
                        wal = file_bytes(state / "roost.db-wal") / 2**20
                        samples.append((t, done, rss, db, wal))
                        print(
                            f"{t:6.0f}s cycles={done:>7} rss={rss:7.1f} MiB db={db:7.2f} MiB wal={wal:6.2f} MiB",
                            flush=True,
                        )

                await asyncio.gather(sample(), *(loop() for _ in range(clients)))
        finally:
            daemon.stop()
        # Steady state: a full retention window of rows on disk, swept, and the WAL checkpointed.
        # Flat means the second half of the steady samples holds no more than the first: each
        # half's median (the WAL swings between checkpoints up to journal_size_limit, so one
        # sample against another says little).
        settled = [s for s in samples if s[0] >= retention * 3] or samples[-1:]
        half = max(1, len(settled) // 2)
        early, late = settled[:half], settled[half:] or settled[-1:]
        last = samples[-1]
        print(f"steady samples from {settled[0][0]:.0f}s to {last[0]:.0f}s, medians of each half:")
        for name, at in (("RSS", 2), ("db", 3), ("wal", 4)):
            a = statistics.median(s[at] for s in early)
            b = statistics.median(s[at] for s in late)
            print(f"  {name:<4} {a:8.2f} -> {b:8.2f} MiB  (x{b / max(a, 1e-9):.2f})")
        print(f"  {last[1]} cycles ({last[1] / last[0]:.0f}/s); target: flat (each x <= 1.05)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--retention", type=float, default=20)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    asyncio.run(run(args.seconds, args.retention, args.clients))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
